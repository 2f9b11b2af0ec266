"""Human and judge grades: arena grade sheets and DevAI judgments, appended to the runs they grade.

- :mod:`procgrade.engine.grades.record`: one grade as read, with its place, and the event it becomes;
- :mod:`procgrade.engine.grades.arena`: the arena grade sheet (layers, scales, CSV and JSON spellings) and
  the study sheet (grade schema v2: a study's own items, declared scales, abstentions, run metadata);
- :mod:`procgrade.engine.grades.devai`: DevAI (Agent-as-a-Judge) judgment files;
- :mod:`procgrade.engine.grades.sources`: which files hold grades, in which format;
- :mod:`procgrade.engine.grades.importing`: appending them, every run or none.
"""

from procgrade.engine.grades.arena import (
    ABSTENTIONS,
    ARENA_LAYERS,
    FORMAT_TAG,
    FORMAT_TAG_V2,
    SCALES,
    GradeSheet,
    StudySheet,
    grade_sheet_json_schema,
)
from procgrade.engine.grades.importing import (
    GradesImport,
    RunGrades,
    append_grades,
    import_grades,
)
from procgrade.engine.grades.record import GradeRecord, NewRun, Place
from procgrade.engine.grades.sources import GRADE_FORMATS, SheetFile, read_grade_files

__all__ = [
    "ABSTENTIONS",
    "ARENA_LAYERS",
    "FORMAT_TAG",
    "FORMAT_TAG_V2",
    "GRADE_FORMATS",
    "SCALES",
    "GradeRecord",
    "GradeSheet",
    "GradesImport",
    "NewRun",
    "Place",
    "RunGrades",
    "SheetFile",
    "StudySheet",
    "append_grades",
    "grade_sheet_json_schema",
    "import_grades",
    "read_grade_files",
]
