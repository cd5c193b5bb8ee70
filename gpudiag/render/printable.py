"""Untrusted text made safe to print: the one rule for text that reaches a terminal.

Process command lines and users, GPU and board names, host and node names, replay and node
files, environment values: gpudiag shows text it did not write. A terminal acts on some of it
(ESC starts a sequence that can clear the screen, retitle the window or write the clipboard:
OSC 52), and some of it hides or reorders what is shown (a carriage return, bidi overrides such
as U+202E, zero-width characters). Every character ``str.isprintable()`` refuses (Unicode's
"Other" and "Separator" categories but the space: C0 and C1 controls, DEL, format characters,
lone surrogates from undecodable bytes, unassigned code points) is printed as its Python string
escape: ``\\n``, ``\\t``, ``\\r``, ``\\x1b``, ``\\x9b``, ``\\u202e``, ``\\udcff``, ``\\U000e0041``. A
backslash itself prints as it is: the exact text is in ``--json``, where JSON's own escapes
carry it.

A byte that is not UTF-8 (a command line, a file name, an environment value: psutil and ``os``
hand it over as a lone surrogate, U+DC80 to U+DCFF) is one such character: every output but JSON
writes it as ``\\udcff``, which names the byte (0xff) and cannot be mistaken for a character of
the text (U+00FF is ``ÿ``; a C1 control U+009B is ``\\x9b``), and is valid UTF-8 wherever it goes.
JSON writes its own escape of the same character (``"\\udcff"``), so ``--json`` and snapshots keep
the exact text and replay it.

- :func:`printable` is applied where a renderer turns outside text into a cell or a line, so
  that widths are measured on what is shown and a newline in a command cannot split a row.
- :func:`guard` is applied to everything the console writes and to every plain-text output
  (``cli.common``): it keeps line breaks and escapes every other such character, so a renderer
  that forgets :func:`printable` can misalign a table but never hand the terminal a control.
- :func:`csv_field` is :func:`printable` plus RFC 4180 quoting where a value needs it, and for
  outside text (``text=True``) :func:`spreadsheet_text`'s neutralising of a leading formula
  character; :func:`json_document` writes such characters, and all others beyond ASCII, in JSON's
  escapes (for msgspec's output). Prometheus' label values and HELP texts are :func:`printable` too, their backslashes
  then doubled by the exposition's own escaping (``export/exposition.py``).
- :func:`strip_trailing_blanks`: output into a pipe or a file carries no padding at line ends.
"""

from __future__ import annotations


def _escape(char: str) -> str:
    return ascii(char)[1:-1]  # '\x1b' -> \x1b, '\u202e' -> \u202e, '\n' -> \n


def printable(text: str) -> str:
    """``text`` with every non-printable character written as its escape (see the module)."""
    if text.isprintable():  # the ordinary case, at C speed: nothing to do
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def guard(text: str) -> str:
    """:func:`printable` line by line: line breaks stay, every other control is escaped."""
    if text.isprintable():
        return text
    if "\n" in text:
        return "\n".join(line if line.isprintable() else printable(line) for line in text.split("\n"))
    return printable(text)


# What a spreadsheet starts a formula with (OWASP's CSV injection list): =, +, -, @, tab, CR.
FORMULA_STARTS = frozenset("=+-@\t\r")


def spreadsheet_text(value: str) -> str:
    """Outside text for a CSV cell, escaped as above and made inert in a spreadsheet: text whose
    first character (after any blanks, which some importers trim) starts a formula gets a single
    quote in front (OWASP's rule), so ``=HYPERLINK(...)`` or ``+cmd|' /C calc'!A0`` is shown, never
    run. Only text from outside goes through here: a number gpudiag writes (``-5``) stays a number."""
    text = printable(value)
    if value.lstrip(" ")[:1] in FORMULA_STARTS:
        return "'" + text
    return text


def csv_field(value: str, text: bool = False) -> str:
    """A value for a ``, ``-separated CSV (nvidia-smi's, gpudiag's): escaped as above, so a record is
    always one line, neutralised by :func:`spreadsheet_text` when it is outside ``text`` (a name, a
    serial, a command: not a figure gpudiag formatted), and quoted as RFC 4180 says (``"``
    doubled) when it holds a comma, a double quote or a leading space, which a reader splitting
    on the separator would otherwise take apart. ``csv.reader(f, skipinitialspace=True)`` reads
    every field back."""
    shown = spreadsheet_text(value) if text else printable(value)
    if "," in shown or '"' in shown or shown[:1] == " ":
        return '"' + shown.replace('"', '""') + '"'
    return shown


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON spells a character beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_document(document: str) -> str:
    """A JSON document from an encoder that writes non-ASCII text as it is (msgspec) made ASCII, as
    ``json.dumps`` writes every other gpudiag document: every character beyond ASCII and DEL becomes
    a JSON ``\\uXXXX`` escape, which means the same character to a JSON reader, so no control reaches
    a terminal and a terminal in another encoding (Latin-1) shows no mojibake. (Such characters can
    only be inside strings: JSON's own syntax is ASCII.)"""
    if document.isascii() and "\x7f" not in document:  # JSON escapes the rest of ASCII's controls
        return document
    return "".join(c if c.isascii() and c != "\x7f" else _json_escape(c) for c in document)


def _rstrip_styled(line: str) -> str:
    """``line`` without the blanks at its end, keeping the colour codes among them."""
    end, codes = len(line), []
    while end:
        if line[end - 1] == " ":
            end -= 1
            continue
        start = line.rfind("\x1b[", 0, end) if line[end - 1] == "m" else -1
        if start < 0 or line[start + 2 : end - 1].strip("0123456789;"):  # not a colour code (SGR)
            break
        codes.append(line[start:end])
        end = start
    return line[:end] + "".join(reversed(codes))


def strip_trailing_blanks(rendered: str) -> str:
    """Output for a pipe or a file: no padding at the ends of lines. Only ends of lines: the text
    after the last line break may go on in the next write."""
    styled = "\x1b" in rendered
    if not styled and " \n" not in rendered:
        return rendered
    lines = rendered.split("\n")
    tail = lines.pop()
    stripped = [_rstrip_styled(line) for line in lines] if styled else [line.rstrip(" ") for line in lines]
    return "\n".join([*stripped, tail])
