"""Score documents: reproducible to the byte across databases, hash seeds and worker counts;
append-only; verified by recomputation; a new rule set adds scores beside the old ones."""

from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import orjson
import pytest
from sqlalchemy import text

from builders import allow_updates, ev, run_started, write_jsonl
from databases import fresh_url
from procgrade.engine.errors import ScoreDriftError
from procgrade.engine.ingest import ingest_native
from procgrade.engine.rescoring import compute_score, score_runs, verify_scores
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.store.scores import ScoreStore
from procgrade.rules.loading import load_ruleset, parse_ruleset

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"
PROCGRADE = [sys.executable, "-m", "procgrade.engine.cli"]


def faulty_run(run_id: str) -> list[dict]:
    """A run that claims success without a passing test and repeats a failing command."""
    return [
        run_started(run_id),
        ev("stage_started", 1, run_id, actor="harness", stage=0, spec_ref="specs/s0.md"),
        ev("file_edit", 2, run_id, stage=0, path="app.py", edit_kind="modify"),
        ev("test_run", 3, run_id, stage=0, command="pytest -q", passed=3, failed=2, exit_code=1),
        ev("test_run", 4, run_id, stage=0, command="pytest -q", passed=3, failed=2, exit_code=1),
        ev("completion_claim", 5, run_id, stage=0, claim="ALL PASSED"),
        ev("stage_ended", 6, run_id, actor="harness", stage=0),
    ]


def _ingest_both(store: EventStore, tmp_path: Path) -> list[str]:
    ingest_native(store, [EXAMPLE, write_jsonl(tmp_path / "faulty.jsonl", faulty_run("faulty-1"))])
    return ["faulty-1", "todo-app-demo"]


def test_score_document_shape_and_exact_score(store: EventStore, tmp_path: Path) -> None:
    _ingest_both(store, tmp_path)
    ruleset = load_ruleset()
    doc = compute_score(store, ruleset, "faulty-1")
    body = doc.body
    assert body["format"] == "procgrade.score/2"
    assert body["run_head_hash"] == store.run("faulty-1").head_hash
    assert body["run_event_count"] == 7
    assert [r["id"] for r in body["rules"]] == sorted(r.id for r in ruleset.rules)
    rules = {r["id"]: r for r in body["rules"]}
    claim = rules["claim-not-contradicted"]
    assert (claim["fulfilled"], claim["violated"], claim["vacuous"]) == (0, 1, 0)
    assert claim["violations"] == [{"seq": 5, "stage": None, "cited": [4, 5]}]  # the last failing run
    thrash = rules["no-repeated-identical-command"]
    assert thrash["violations"] == [{"seq": 4, "stage": None, "cited": [3, 4]}]
    first = rules["test-before-first-edit"]
    assert first["violations"] == [{"seq": 2, "stage": None, "cited": [2]}]
    # The process score is the weighted mean of per-rule ratios, exactly.
    weighted = [(r["weight"], Fraction(int(r["score"]["num"]), int(r["score"]["den"])))
                for r in body["rules"] if r["score"]]
    assert doc.process_score == sum((w * x for w, x in weighted), Fraction(0)) / sum(w for w, _ in weighted)
    assert body["process_score"] == {"num": str(doc.process_score.numerator),
                                     "den": str(doc.process_score.denominator)}
    assert "sum(weight(r) * rule_score(r))" in body["formula"]
    # contradicted claim (0/1, weight 3) and a claim made (1/1, weight 3: finish-with-a-claim weighs as
    # much as the heaviest claim rule, which a run that never claims escapes)
    assert body["patterns"]["completion_claim_accuracy"]["score"] == {"num": "1", "den": "2"}
    applicable = [r for r in body["rules"] if r["fulfilled"] + r["violated"]]
    assert body["coverage"] == {"rules": 15, "rules_applicable": len(applicable),
                                "judged_activations": sum(r["fulfilled"] + r["violated"] for r in applicable),
                                "model_events": 4}
    # the same run under rule set v1 keeps the v1 layout: no coverage, format 1
    v1 = compute_score(store, load_ruleset(ROOT / "rules" / "sets" / "default-v1.yaml"), "faulty-1").body
    assert v1["format"] == "procgrade.score/1" and "coverage" not in v1 and v1["semantics_version"] == "1"
    assert doc.canonical == orjson.dumps(body, option=orjson.OPT_SORT_KEYS)  # no floats: orjson == RFC 8785


def test_score_bytes_identical_across_databases(tmp_path: Path) -> None:
    documents = []
    for kind in ("sqlite", "postgresql"):
        with fresh_url(kind, tmp_path / kind) as url:
            store = open_store(url, create=True)
            try:
                run_ids = _ingest_both(store, tmp_path)
                outcomes = score_runs(store, run_ids, load_ruleset())
                documents.append([o.document.canonical for o in outcomes])
                stored = [s.document.encode() for s in ScoreStore(store).scores()]
                assert stored == documents[-1]
            finally:
                store.close()
    assert documents[0] == documents[1]


def test_score_bytes_identical_across_hash_seeds(tmp_path: Path) -> None:
    db = tmp_path / "seeds.db"
    store = open_store(f"sqlite:///{db}", create=True)
    _ingest_both(store, tmp_path)
    store.close()
    script = (
        "import sys; from procgrade.engine.store import open_store; from procgrade.engine.rescoring import compute_score; "
        "from procgrade.rules.loading import load_ruleset; s = open_store(sys.argv[1]); r = load_ruleset(); "
        "sys.stdout.buffer.write(b''.join(compute_score(s, r, x).canonical for x in ('faulty-1', 'todo-app-demo')))"
    )
    outputs = set()
    for seed in ("0", "1", "4242", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", script, f"sqlite:///{db}"], env=env, capture_output=True,
                              check=True, cwd=ROOT)
        outputs.add(done.stdout)
    assert len(outputs) == 1 and b"procgrade.score/2" in outputs.pop()


def test_rescore_output_independent_of_workers(tmp_path: Path) -> None:
    stored = []
    for workers in ("1", "2"):
        url = f"sqlite:///{tmp_path}/w{workers}.db"
        paths = [str(EXAMPLE)]
        for i in range(5):
            paths.append(str(write_jsonl(tmp_path / f"f{workers}-{i}.jsonl", faulty_run(f"faulty-{i}"))))
        subprocess.run([*PROCGRADE, "ingest", "--db", url, *paths], check=True, capture_output=True, cwd=ROOT)
        done = subprocess.run([*PROCGRADE, "rescore", "--all", "--workers", workers, "--db", url],
                              check=True, capture_output=True, cwd=ROOT)
        assert b"faulty-4" in done.stdout
        store = open_store(url)
        stored.append([(s.run_id, s.document, s.document_sha256) for s in ScoreStore(store).scores()])
        store.close()
    assert len(stored[0]) == 6
    assert stored[0] == stored[1]


def test_rescoring_is_idempotent_and_a_new_ruleset_adds_scores(store: EventStore, tmp_path: Path) -> None:
    run_ids = _ingest_both(store, tmp_path)
    default = load_ruleset()
    assert all(o.written for o in score_runs(store, run_ids, default))
    assert not any(o.written for o in score_runs(store, run_ids, default))
    heavier = parse_ruleset(
        (ROOT / "rules" / "sets" / "default.yaml").read_text().replace("name: default", "name: heavier")
        .replace("    weight: 2\n    template: no_repeat", "    weight: 5\n    template: no_repeat"),
        "heavier.yaml")
    score_runs(store, run_ids, heavier)
    scores = ScoreStore(store).scores()
    assert len(scores) == 4
    assert len({s.ruleset_hash for s in scores}) == 2
    checked, drifts = verify_scores(store)
    assert (checked, drifts) == (4, [])


def test_scores_are_append_only_in_the_database(store: EventStore, tmp_path: Path) -> None:
    run_ids = _ingest_both(store, tmp_path)
    score_runs(store, run_ids, load_ruleset())
    for statement in ("UPDATE scores SET process_score = '1/1'", "DELETE FROM scores",
                      "UPDATE rulesets SET body = '{}'", "DELETE FROM rulesets"):
        with pytest.raises(Exception, match="append-only"):
            with store.engine.begin() as conn:
                conn.execute(text(statement))
    assert len(ScoreStore(store).scores()) == 2


def test_verify_names_a_tampered_score_and_a_changed_log(store: EventStore, store_url: str, db_kind: str,
                                                         tmp_path: Path) -> None:
    run_ids = _ingest_both(store, tmp_path)
    score_runs(store, run_ids, load_ruleset())
    allow_updates(store, db_kind, "scores", "events")
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE scores SET document = replace(document, :old, :new) WHERE run_id = 'faulty-1'"),
                     {"old": '"violated":1', "new": '"violated":0'})
        conn.execute(text("UPDATE events SET outcome = 'pass' WHERE run_id = 'todo-app-demo' AND seq = 7"))
    checked, drifts = verify_scores(store)
    assert checked == 2
    assert [(d.run_id, d.reason) for d in drifts] == [
        ("faulty-1", "recomputed document differs from the stored bytes"),
        ("todo-app-demo", "recomputed document differs from the stored bytes"),
    ]
    done = subprocess.run([*PROCGRADE, "verify", "--db", store_url], capture_output=True, cwd=ROOT)
    assert done.returncode != 0
    assert b"faulty-1" in done.stderr and b"todo-app-demo" in done.stderr and b"2 of 2" in done.stderr


def test_a_different_document_for_the_same_key_is_drift(store: EventStore, tmp_path: Path) -> None:
    run_ids = _ingest_both(store, tmp_path)
    score_runs(store, run_ids, load_ruleset())
    stored = ScoreStore(store).scores()[0]
    from procgrade.engine.store.scores import StoredScore

    forged = StoredScore(**{**stored.__dict__, "document": stored.document + " ", "document_sha256": "0" * 64})
    with pytest.raises(ScoreDriftError):
        ScoreStore(store).append_score(forged)


def test_cli_score_explain_and_verify(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    path = write_jsonl(tmp_path / "faulty.jsonl", faulty_run("faulty-1"))
    subprocess.run([*PROCGRADE, "ingest", "--db", url, str(path)], check=True, capture_output=True, cwd=ROOT)
    done = subprocess.run([*PROCGRADE, "score", "--db", url, "faulty-1"], check=True, capture_output=True,
                          cwd=ROOT)
    assert b"faulty-1" in done.stdout and b"new" in done.stdout
    explained = subprocess.run([*PROCGRADE, "explain", "--db", url, "faulty-1"], check=True,
                               capture_output=True, cwd=ROOT, env=dict(os.environ, COLUMNS="200"))
    assert b"claim-not-contradicted" in explained.stdout
    assert b"seq 5 [agent] completion_claim: claims done: ALL PASSED" in explained.stdout
    verified = subprocess.run([*PROCGRADE, "verify", "--db", url], check=True, capture_output=True, cwd=ROOT)
    assert b"1 stored scores reproduce byte for byte" in verified.stdout


def test_cli_refuses_unknown_runs_and_a_bare_rescore(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    subprocess.run([*PROCGRADE, "ingest", "--db", url, str(EXAMPLE)], check=True, capture_output=True, cwd=ROOT)
    unknown = subprocess.run([*PROCGRADE, "score", "--db", url, "todo-app-demo", "no-such-run"],
                             capture_output=True, cwd=ROOT)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == b"procgrade: no run 'no-such-run' in the store: `procgrade runs` lists the stored runs"
    store = open_store(url)
    try:
        assert ScoreStore(store).scores() == []  # nothing scored when one run is unknown
    finally:
        store.close()
    bare = subprocess.run([*PROCGRADE, "rescore", "--db", url], capture_output=True, cwd=ROOT)
    assert bare.returncode == 2 and b"--all" in bare.stderr
    bad_rules = tmp_path / "bad.yaml"
    bad_rules.write_text("name: x\nversion: 1\nrules: []\n")
    refused = subprocess.run([*PROCGRADE, "score", "--db", url, "--rules", str(bad_rules), "todo-app-demo"],
                             capture_output=True, cwd=ROOT)
    assert refused.returncode == 1
    assert refused.stderr.decode().startswith(f"{bad_rules}:3: rules: ")
