"""Generated bad input: thousands of malformed tables, of every table the project reads, in every format.

Each case is a kind of fault and a table. For each, hypothesis builds valid tables (1 to 6 rows, with or
without their optional columns, as CSV, JSONL or Parquet), breaks them in that way at a drawn place with
a drawn value, and hands them to the readers: `core.read_table(path, table)`, and `lang.load_lexicon` /
`lang.read_patterns` for the lexicon and the pattern files. Every one must end in a `TableError` whose
message names the file, and the row and the column where the fault has them; never another exception.
"""
import atexit, csv, io, json, re, shutil, tempfile
from collections import Counter
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from orbench_ml.core import KEYS, NONEMPTY, OPEN_TABLES, TABLES, TableError, columns, read_table
from orbench_ml.lang import load_lexicon, read_patterns

EXAMPLES = 16                                     # per case, each in every format of its fault; see `fed`
HUGE = (20_000, 200_000)                          # characters of a huge cell
MARK = 'QQMARKQQ'                                 # stands where bytes are broken after encoding
TMP = Path(tempfile.mkdtemp(prefix='orbench-bad-input-'))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)   # every file in it is deleted after use; then the folder
FED, _names = Counter(), count()

# --- valid tables ---------------------------------------------------------------------------------

def good_value(c, i:int)->str:
    "A valid value of column `c` in row `i` (ids are unique per row)"
    if c.allowed: return c.allowed[i % len(c.allowed)]
    if c.kind == 'float': return f'{i / 4}'
    if c.kind == 'int': return str(i + 2)
    if c.kind == 'bool': return ('true', 'false')[i % 2]
    if c.checks: return f'pattern {i}'
    return f'{c.name}-{i}'

@st.composite
def good_tables(draw, table:str)->tuple[list[str], list[dict]]:
    "A valid table: its header and rows of text (optional columns left out at random)"
    cols = [c for c in TABLES[table] if not c.optional or draw(st.booleans())]
    n = draw(st.integers(1, 6))
    return [c.name for c in cols], [{c.name: good_value(c, i) for c in cols} for i in range(n)]

# --- writing them ---------------------------------------------------------------------------------

def csv_text(header, rows)->str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator='\n')
    w.writerow(header)
    w.writerows([['' if r.get(h) is None else r.get(h) for h in header] for r in rows])
    return buf.getvalue()

def jsonl_text(header, rows)->str:
    return ''.join(json.dumps({h: r[h] for h in header if h in r}, ensure_ascii=False) + '\n' for r in rows)

def parquet_bytes(header, rows)->bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pydict({h: [r.get(h) for r in rows] for h in header}), buf)
    return buf.getvalue()

@dataclass
class Sheet:
    "A table on its way to a file: its format, name, header and rows (a fault changes them)"
    fmt:str
    table:str
    header:list
    rows:list

    def bytes(self, encoding:str='utf-8')->bytes:
        if self.fmt == '.parquet': return parquet_bytes(self.header, self.rows)
        return (csv_text if self.fmt == '.csv' else jsonl_text)(self.header, self.rows).encode(encoding)

    def column(self, draw, pred=lambda c: True):
        "A drawn column that `pred` selects (an optional one the table left out is put back)"
        c = draw(st.sampled_from([c for c in TABLES[self.table] if pred(c)]))
        if c.name not in self.header:
            self.header.append(c.name)
            for i, r in enumerate(self.rows): r[c.name] = good_value(c, i)
        return c

    def row(self, draw)->int: return draw(st.integers(0, len(self.rows) - 1))

# --- faults: each breaks a sheet and returns (file bytes, row, column); row, column None where the fault has none

def _set_cell(draw, s:Sheet, pred, values):
    "Put a drawn bad value (from `values`, or `values(column)`) in a drawn cell of a column that `pred` selects"
    c, i = s.column(draw, pred), s.row(draw)
    s.rows[i][c.name] = draw(values(c) if callable(values) else values)
    return s.bytes(), i + 1, c.name

_text = st.text(st.characters(blacklist_categories=('Cs',), blacklist_characters='\x00\r'), max_size=30)
_name = st.text(st.characters(whitelist_categories=('Lu', 'Ll', 'Nd'), whitelist_characters='_ -'), min_size=1, max_size=20)
_not_number = _text.filter(lambda v: v.strip() and not re.fullmatch(r'\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*|\s*[-+]?inf(inity)?\s*', v, re.I))
_bad_regex = st.sampled_from(['(', '[a', '*x', 'a{2,1}', '(?P<1>x)', '\\', '(' * 3000]) | st.from_regex(r'[a-z ]{0,5}[A-Z][a-z ]{0,5}', fullmatch=True)
_bad_bytes = st.sampled_from([b'\xe9', b'\xff', b'\xc3(', b'\xed\xa0\x80', b'\xf8\x88\x80\x80\x80', b'\x80abc', b'caf\xe9'])
_small_ints = st.integers(-999, 999)

def missing_column(draw, s):
    c = s.column(draw, lambda c: not c.optional)
    s.header.remove(c.name)
    if not s.header:                   # a table of one column keeps a column of the file's own
        s.header.append('note')
        for i, r in enumerate(s.rows): r['note'] = f'note {i}'
    return s.bytes(), None, c.name

def unexpected_column(draw, s):
    name = draw(_name.filter(lambda n: n not in columns(s.table) and n != 'line' and n.strip() == n))
    s.header.append(name)
    for r in s.rows: r[name] = draw(_text)
    return s.bytes(), None, name

def unknown_value(draw, s):
    return _set_cell(draw, s, lambda c: c.allowed, lambda c: _text.filter(lambda v: v not in c.allowed and v != ''))

def empty_required(draw, s):
    blanks = {'.csv': ['', ' ', '\t', '  '], '.jsonl': ['', ' ', None], '.parquet': ['', None]}[s.fmt]
    if s.fmt == '.csv' and len(s.header) == 1: blanks = ['']   # a line of spaces alone is a blank line, which CSV readers skip
    return _set_cell(draw, s, lambda c: c.required, st.sampled_from(blanks))

def not_a_number(draw, s):
    return _set_cell(draw, s, lambda c: c.kind in ('float', 'int'), _not_number)

def not_an_integer(draw, s):
    return _set_cell(draw, s, lambda c: c.kind == 'int', st.sampled_from(['1.5', '-0.25', '1e30', '99999999999999999999999', '3.000001']))

def not_a_bool(draw, s):
    return _set_cell(draw, s, lambda c: c.kind == 'bool',
                     _text.filter(lambda v: v.strip() and v.strip().lower() not in ('true', 'false', '1', '0', 'yes', 'no')))

def bad_value_check(draw, s):
    return _set_cell(draw, s, lambda c: c.checks, _bad_regex)

def duplicate_key(draw, s):
    s.rows.append(dict(s.rows[s.row(draw)]))
    for c in TABLES[s.table]:          # the copy differs outside its key
        if c.name in s.header and c.name not in KEYS[s.table] and not c.allowed and c.kind == 'str': s.rows[-1][c.name] += ' (again)'
    return s.bytes(), len(s.rows), KEYS[s.table][0]

def replacement_character(draw, s):
    return _set_cell(draw, s, lambda c: c.kind == 'str', st.builds(lambda a, b: a + '\ufffd' + b, _text, _text))

def huge_cell(draw, s):
    size = draw(st.integers(*HUGE))
    def huge(c):
        if c.checks: return st.just('x' * size + '(')
        if c.kind in ('float', 'int'): return st.just('9' * size + 'x')
        return st.just(c.allowed[0] * (size // len(c.allowed[0])))
    return _set_cell(draw, s, lambda c: c.allowed or c.checks or c.kind in ('float', 'int'), huge)

def non_scalar(draw, s):
    c, i = s.column(draw, lambda c: c.name not in KEYS[s.table]), s.row(draw)
    value = draw(st.lists(_small_ints, max_size=3) | st.dictionaries(st.text(max_size=3), _small_ints, max_size=2))
    if s.fmt == '.parquet':            # a Parquet column holds one type: every cell of it is a list
        value, i = draw(st.lists(_small_ints, max_size=3)), 0
        for r in s.rows: r[c.name] = value
    s.rows[i][c.name] = value
    return s.bytes(), i + 1, c.name

def latin1_file(draw, s):
    c, i = s.column(draw, lambda c: c.kind == 'str'), s.row(draw)
    s.rows[i][c.name] = draw(st.sampled_from(['café', 'Où?', 'naïve ü', 'señor ñ', '£5']))
    return s.bytes('latin-1'), i + 1, c.name

def invalid_utf8(draw, s):
    c, i = s.column(draw, lambda c: c.kind == 'str'), s.row(draw)
    s.rows[i][c.name] = draw(_text.filter(lambda v: '\n' not in v)) + MARK
    return s.bytes().replace(MARK.encode(), draw(_bad_bytes)), i + 1, c.name

def header_bad_encoding(draw, s):
    i = draw(st.integers(0, len(s.header) - 1))
    for r in s.rows: r[s.header[i] + MARK] = r.pop(s.header[i])
    s.header[i] += MARK
    return s.bytes().replace(MARK.encode(), draw(_bad_bytes)), None, None

def unclosed_quote(draw, s):
    c, i = s.column(draw), s.row(draw)
    s.rows[i][c.name] = MARK
    return s.bytes().replace(MARK.encode(), b'"' + draw(_name).encode()), i + 1, None

def ragged_row(draw, s):
    i = s.row(draw)
    lines = csv_text(s.header, s.rows).split('\n')
    lines[i + 1] += ',' + ','.join(draw(st.lists(_name, min_size=1, max_size=3)))
    return '\n'.join(lines).encode(), i + 1, None

def duplicate_header(draw, s):
    name = draw(st.sampled_from(s.header))
    return csv_text(s.header + [name], s.rows).encode(), None, name

def empty_file(draw, s):
    return draw(st.sampled_from([b'', b'\n', b'  \n\n', b'\xef\xbb\xbf'] if s.fmt != '.parquet' else [b''])), None, None

def header_only(draw, s):
    s.rows = []
    return s.bytes(), None, None

def json_not_object(draw, s):
    i = s.row(draw)
    lines = jsonl_text(s.header, s.rows).splitlines()
    lines[i] = json.dumps(draw(st.lists(_small_ints, max_size=3) | _small_ints | st.text(max_size=5) | st.none()))
    return ('\n'.join(lines) + '\n').encode(), i + 1, None

def json_invalid(draw, s):
    i = s.row(draw)
    lines = jsonl_text(s.header, s.rows).splitlines()
    lines[i] = lines[i][:draw(st.integers(1, len(lines[i]) - 1))]
    return ('\n'.join(lines) + '\n').encode(), i + 1, None

def not_parquet(draw, s):
    good = s.bytes()
    return draw(st.binary(min_size=1, max_size=200) | st.just(good[:len(good) // 2]) | st.just(b'PAR1' + good[4:-8])), None, None

ALL, CSV, JSONL, PARQUET, TEXT = ('.csv', '.jsonl', '.parquet'), ('.csv',), ('.jsonl',), ('.parquet',), ('.csv', '.jsonl')
has = lambda pred: (lambda t: any(pred(c) for c in TABLES[t]))
FAULTS = {   # name: (the fault, its formats, the tables it applies to)
    'missing column': (missing_column, ALL, has(lambda c: not c.optional)),
    'unexpected column': (unexpected_column, ALL, lambda t: t not in OPEN_TABLES),
    'unknown value': (unknown_value, ALL, has(lambda c: c.allowed)),
    'empty required cell': (empty_required, ALL, has(lambda c: c.required)),
    'not a number': (not_a_number, ALL, has(lambda c: c.kind in ('float', 'int'))),
    'not an integer': (not_an_integer, ALL, has(lambda c: c.kind == 'int')),
    'not a boolean': (not_a_bool, ALL, has(lambda c: c.kind == 'bool')),
    'failed value check': (bad_value_check, ALL, has(lambda c: c.checks)),
    'duplicate key': (duplicate_key, ALL, lambda t: bool(KEYS[t])),
    'replacement character': (replacement_character, ALL, has(lambda c: c.kind == 'str')),
    'huge cell': (huge_cell, ALL, has(lambda c: c.allowed or c.checks or c.kind in ('float', 'int'))),
    'list or dict in a cell': (non_scalar, JSONL + PARQUET, lambda t: True),
    'latin-1 file': (latin1_file, TEXT, has(lambda c: c.kind == 'str')),
    'invalid UTF-8 bytes': (invalid_utf8, TEXT, has(lambda c: c.kind == 'str')),
    'header not UTF-8': (header_bad_encoding, CSV, lambda t: True),
    'unclosed quote': (unclosed_quote, CSV, lambda t: True),
    'row longer than header': (ragged_row, CSV, lambda t: True),
    'column named twice': (duplicate_header, CSV, lambda t: True),
    'empty file': (empty_file, ALL, lambda t: True),
    'header only': (header_only, CSV + PARQUET, lambda t: t in NONEMPTY),
    'JSON line not an object': (json_not_object, JSONL, lambda t: True),
    'broken JSON line': (json_invalid, JSONL, lambda t: True),
    'not a Parquet file': (not_parquet, PARQUET, lambda t: True),
}
CASES = [(f, t) for f, (_, _, applies) in FAULTS.items() for t in TABLES if applies(t)]

# --- pattern files (text, read by lang.read_patterns) -----------------------------------------------

PATTERN_FAULTS = {   # name: (a bad line, the column it names)
    'bad regular expression': (_bad_regex, 'pattern'),
    'unknown section': (st.from_regex(r'\[[a-z]{1,8}\]', fullmatch=True).filter(lambda s: s[1:-1] not in TABLES['patterns'][1].allowed), 'section'),
    'pattern before any section': (st.from_regex(r'[a-z ]{1,12}', fullmatch=True).filter(str.strip), 'section'),
    'not UTF-8': (_bad_bytes, None),
}
print(f'{len(CASES) + len(PATTERN_FAULTS)} distinct bad-input cases: {len(FAULTS)} kinds of fault x {len(TABLES)} tables '
      f'where they apply ({len(CASES)}), and {len(PATTERN_FAULTS)} faults of pattern files')

# --- the check ------------------------------------------------------------------------------------

def located(fault:str, path:Path, row:int|None, col:str|None)->bool:
    "Does one fault line name this file, and the row and column when they are known?"
    return (fault.startswith(str(path)) and (row is None or re.search(rf', row {row}\b', fault) is not None)
            and (col is None or f'column {col!r}' in fault))

def assert_named(read, path:Path, row:int|None, col:str|None):
    with pytest.raises(TableError) as e: read(path)
    FED['tables'] += 1
    shown = e.value.faults[:10]
    assert str(path) in str(e.value) and all(len(f) < 1000 for f in shown), str(e.value)[:2000]
    assert any(located(f, path, row, col) for f in shown), f'expected row {row}, column {col!r} in:\n{str(e.value)[:2000]}'

def readers(table:str)->list:
    return [lambda p: read_table(p, table)] + ([load_lexicon] if table == 'lexicon' else [])

SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

def planned(fault:str)->int:
    "The tables a case is meant to feed: an example in each format of its fault (a pattern fault: one file)"
    return EXAMPLES * (len(FAULTS[fault][1]) if fault in FAULTS else 1)

@pytest.fixture
def fed(request):
    "Around all the examples of one case (whatever the order or the worker): hypothesis fed it at least one example"
    before = FED['tables']
    yield
    fault = request.node.callspec.params['fault']   # a small table (one column) has few distinct examples: not all 16
    assert FED['tables'] - before >= planned(fault) // EXAMPLES, f'{fault}: no table fed of {planned(fault)} planned'

@pytest.mark.parametrize('fault,table', CASES, ids=[f'{t}: {f}' for f, t in CASES])
@SETTINGS
@given(data=st.data())
def test_generated_bad_table(fault, table, data, fed):
    "One valid table, broken in the way of `fault` in each format the fault applies to"
    make, formats, _ = FAULTS[fault]
    header, rows = data.draw(good_tables(table))
    for fmt in formats:
        raw, row, col = make(data.draw, Sheet(fmt, table, list(header), [dict(r) for r in rows]))
        path = TMP/f'{table}-{next(_names)}{fmt}'
        path.write_bytes(raw)
        try: assert_named(data.draw(st.sampled_from(readers(table))), path, row, col)
        finally: path.unlink()

@pytest.mark.parametrize('fault', PATTERN_FAULTS)
@SETTINGS
@given(data=st.data())
def test_generated_bad_pattern_file(fault, data, fed):
    bad, col = PATTERN_FAULTS[fault]
    head = (['# refusal patterns', '', '# one regular expression a line'] if fault == 'pattern before any section' else
            ['# refusal patterns', '[settings]', 'char_weight = 1', '[refusal]', r"\bi can't\b"])
    k = data.draw(st.integers(0 if fault != 'bad regular expression' else 2, len(head)))
    line = data.draw(bad)
    inserted = [line if isinstance(line, bytes) else line.encode()] + ([b'sorry'] if fault == 'unknown section' else [])
    path = TMP/f'patterns-{next(_names)}.txt'
    path.write_bytes(b'\n'.join([s.encode() for s in head[:k]] + inserted + [s.encode() for s in head[k:] + ['[hedge]', r'\bperhaps\b']]) + b'\n')
    try:
        with pytest.raises(TableError) as e: read_patterns(path)
        FED['tables'] += 1
        n = k + len(inserted)           # the file line of the fault
        assert any(f.startswith(str(path)) and re.search(rf'line {n}\b', f) and (col is None or f'column {col!r}' in f)
                   for f in e.value.faults[:10]), str(e.value)[:2000]
    finally: path.unlink()

def test_enough_tables():
    "The module plans at least 5,000 malformed tables a run over at least 30 distinct cases (`fed` checks each case ran)"
    cases = [f for f, _ in CASES] + list(PATTERN_FAULTS)
    print(f'{sum(map(planned, cases))} malformed tables planned, {len(cases)} distinct cases')
    assert sum(map(planned, cases)) >= 5000 and len(cases) >= 30
