"""Team lunch: a shared group order for a team (sample product of procgrade's browser grading).

Python standard library only: an HTTP server rendering HTML pages, a SQLite database. Run with
``PORT`` and ``DATABASE_PATH`` in the environment; ``SERVICE_FEE_PERCENT`` fixes the fee.
"""

import hashlib
import html
import os
import secrets
import sqlite3
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DB = os.environ["DATABASE_PATH"]
PORT = int(os.environ["PORT"])
FEE = int(os.environ.get("SERVICE_FEE_PERCENT", "10"))
MAX_QTY = 10

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, pw TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (token TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, note TEXT NOT NULL,
    cents INTEGER NOT NULL, qty INTEGER NOT NULL, added_by TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS state (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""


def connect():
    conn = sqlite3.connect(DB)
    conn.row_factory = sqlite3.Row
    return conn


def money(cents):
    return f"${cents // 100}.{cents % 100:02d}"


def parse_money(text):
    text = text.strip().lstrip("$")
    whole, _, frac = text.partition(".")
    if not whole.isdigit() or (frac and (not frac.isdigit() or len(frac) > 2)):
        raise ValueError
    return int(whole) * 100 + int((frac + "00")[:2] or 0)


def fee_of(subtotal):
    return (subtotal * FEE + 50) // 100


def page(title, body, user=None):
    who = (f'<p>Signed in as {html.escape(user)}</p><form method="post" action="/logout">'
           f'<button type="submit">Sign out</button></form>') if user else ""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"</head><body><header><h1>{html.escape(title)}</h1>{who}</header><main>{body}</main></body></html>")


def status(conn):
    row = conn.execute("SELECT v FROM state WHERE k = 'status'").fetchone()
    return row["v"] if row else "Open"


def items_for(conn, user):
    return conn.execute("SELECT * FROM items ORDER BY id").fetchall()


def order_page(conn, user, error=""):
    rows = items_for(conn, user)
    alert = f'<p role="alert">{html.escape(error)}</p>' if error else ""
    lines = "".join(
        f"<tr><td>{html.escape(r['name'])}</td><td>{html.escape(r['note'])}</td><td>{money(r['cents'])}</td>"
        f"<td>{r['qty']}</td><td>{money(r['cents'] * r['qty'])}</td><td>{html.escape(r['added_by'])}</td>"
        f"<td><a href='/items/{r['id']}/edit'>Rename {html.escape(r['name'])}</a></td></tr>"
        for r in rows)
    table = ("<table><thead><tr><th>Item</th><th>Note</th><th>Price</th><th>Quantity</th><th>Line total</th>"
             f"<th>Added by</th><th>Actions</th></tr></thead><tbody>{lines}</tbody></table>") if rows else \
        "<p>No items yet.</p>"
    subtotal = sum(r["cents"] * r["qty"] for r in rows)
    fee = fee_of(subtotal)
    summary = (f"<p>Subtotal: {money(subtotal)}</p><p>Service fee ({FEE}%): {money(fee)}</p>"
               f"<p>Total: {money(subtotal + fee)}</p>")
    state = status(conn)
    form = "" if state != "Open" else """
<h2>Add an item</h2>
<form method="post" action="/items">
<label for="name">Item name</label> <input id="name" name="name" required>
<label for="price">Price</label> <input id="price" name="price" required>
<label for="qty">Quantity</label> <input id="qty" name="qty" type="number" value="1">
<label for="note">Note</label> <input id="note" name="note">
<button type="submit">Add item</button>
</form>
<form method="post" action="/place"><button type="submit">Place order</button></form>"""
    return page("Team lunch order", f"{alert}<p>Status: {state}</p>{table}{summary}{form}", user)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send(self, code, text, headers=()):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def redirect(self, where, headers=()):
        self.send(303, "", [("Location", where), *headers])

    def form(self):
        size = int(self.headers.get("Content-Length") or 0)
        data = urllib.parse.parse_qs(self.rfile.read(size).decode(), keep_blank_values=True)
        return {k: v[0] for k, v in data.items()}

    def user(self, conn):
        for part in (self.headers.get("Cookie") or "").split(";"):
            key, _, value = part.strip().partition("=")
            if key == "session":
                row = conn.execute("SELECT name FROM sessions WHERE token = ?", (value,)).fetchone()
                if row:
                    return row["name"]
        return None

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/health":
            return self.send(200, "ok")
        conn = connect()
        try:
            user = self.user(conn)
            if path == "/login":
                return self.send(200, page("Sign in", LOGIN))
            if path == "/signup":
                return self.send(200, page("Sign up", SIGNUP))
            if user is None:
                return self.redirect("/login")
            if path == "/":
                error = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("error", [""])[0]
                return self.send(200, order_page(conn, user, ERRORS.get(error, "")))
            if path.startswith("/items/") and path.endswith("/edit"):
                row = conn.execute("SELECT * FROM items WHERE id = ?", (path.split("/")[2],)).fetchone()
                if row is None:
                    return self.send(404, page("Not found", "<p>No such item.</p>", user))
                return self.send(200, page(f"Rename {row['name']}", EDIT.format(id=row["id"], name=html.escape(row["name"])), user))
            return self.send(404, page("Not found", "<p>No such page.</p>", user))
        finally:
            conn.close()

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        data = self.form()
        conn = connect()
        try:
            if path == "/signup":
                name, pw = data.get("username", "").strip(), data.get("password", "")
                if not name or not pw:
                    return self.send(400, page("Sign up", "<p role='alert'>Username and password are required</p>" + SIGNUP))
                conn.execute("INSERT OR REPLACE INTO users VALUES (?, ?)", (name, hashlib.sha256(pw.encode()).hexdigest()))
                conn.commit()
                return self.redirect("/login")
            if path == "/login":
                row = conn.execute("SELECT pw FROM users WHERE name = ?", (data.get("username", ""),)).fetchone()
                if row is None or row["pw"] != hashlib.sha256(data.get("password", "").encode()).hexdigest():
                    return self.send(200, page("Sign in", "<p role='alert'>Wrong username or password</p>" + LOGIN))
                token = secrets.token_hex(16)
                conn.execute("INSERT INTO sessions VALUES (?, ?)", (token, data["username"]))
                conn.commit()
                return self.redirect("/", [("Set-Cookie", f"session={token}; Path=/; HttpOnly")])
            user = self.user(conn)
            if user is None:
                return self.redirect("/login")
            if path == "/logout":
                conn.execute("DELETE FROM sessions WHERE name = ?", (user,))
                conn.commit()
                return self.redirect("/login")
            if path == "/items":
                return self.add_item(conn, user, data)
            if path.startswith("/items/") and path.endswith("/edit"):
                new = data.get("name", "").strip()
                if new:
                    conn.execute("UPDATE items SET name = ? WHERE id = ?", (new, path.split("/")[2]))
                    conn.commit()
                return self.redirect("/")
            if path == "/place":
                if status(conn) != "Open":
                    return self.redirect("/")
                rows = items_for(conn, user)
                if not rows:
                    return self.redirect("/?error=empty")
                total = sum(r["cents"] * r["qty"] for r in rows)
                total += fee_of(total)
                return self.send(200, page("Confirm order", CONFIRM.format(total=money(total)), user))
            if path == "/place/confirm":
                conn.execute("INSERT OR REPLACE INTO state VALUES ('status', 'Placed')")
                conn.commit()
                return self.redirect("/")
            return self.send(404, page("Not found", "<p>No such page.</p>", user))
        finally:
            conn.close()

    def add_item(self, conn, user, data):
        if status(conn) != "Open":
            return self.redirect("/")
        try:
            cents = parse_money(data.get("price", ""))
        except ValueError:
            return self.redirect("/?error=price")
        try:
            qty = int(data.get("qty", "1"))
        except ValueError:
            return self.redirect("/?error=qty")
        if qty < 1 or qty > MAX_QTY:
            return self.redirect("/?error=qty")
        name = data.get("name", "").strip()
        if not name:
            return self.redirect("/?error=name")
        conn.execute("INSERT INTO items (name, note, cents, qty, added_by) VALUES (?, ?, ?, ?, ?)",
                     (name, data.get("note", "").strip(), cents, qty, user))
        conn.commit()
        return self.redirect("/")


ERRORS = {"empty": "Add an item before placing the order", "price": "Enter a price such as 4.50",
          "qty": f"Quantity must be between 1 and {MAX_QTY}", "name": "Enter an item name"}
LOGIN = """<form method="post" action="/login">
<label for="u">Username</label> <input id="u" name="username">
<label for="p">Password</label> <input id="p" name="password" type="password">
<button type="submit">Sign in</button></form><p><a href="/signup">Create an account</a></p>"""
SIGNUP = """<form method="post" action="/signup">
<label for="u">Username</label> <input id="u" name="username">
<label for="p">Password</label> <input id="p" name="password" type="password">
<button type="submit">Create account</button></form>"""
EDIT = """<form method="post" action="/items/{id}/edit">
<label for="n">Item name</label> <input id="n" name="name" value="{name}">
<button type="submit">Save</button></form><p><a href="/">Back to the order</a></p>"""
CONFIRM = """<p>Place this order for {total}?</p>
<form method="post" action="/place/confirm"><button type="submit">Confirm</button></form>
<p><a href="/">Cancel</a></p>"""


def main():
    conn = connect()
    conn.executescript(SCHEMA)
    conn.commit()
    conn.close()
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    print(f"team lunch listening on 127.0.0.1:{PORT}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
