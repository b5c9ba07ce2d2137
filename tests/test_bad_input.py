"""Bad input gets one clear error that names the file, the row and the column of the fault.

(The unknown category of a prompts CSV is checked in nbs/00_core.ipynb; tests/test_bad_input_generated.py
feeds thousands of generated bad tables of every kind.)"""
import json
import pandas as pd
import pytest
from orbench_ml.core import TableError, read_table, write_table

def good_prompts(n=3):
    return pd.DataFrame(dict(
        prompt_id=[f'privacy-00{i}-base-en' for i in range(1, n+1)],
        text=[f'How do I delete the data an app keeps about me? ({i})' for i in range(n)],
        lang=['en']*n, category=['privacy']*n, label=['safe']*n, method=['base']*n,
        base_id=[f'privacy-00{i}' for i in range(1, n+1)], pair_id=['']*n, source=['test']*n))

def good_responses(n=3):
    return pd.DataFrame(dict(prompt_id=[f'p{i}' for i in range(n)], model=['m']*n, response=['ok']*n,
        finish_reason=['stop']*n, error=['']*n, latency_s=['0.5']*n, input_tokens=['10']*n,
        output_tokens=['20']*n, cost_usd=['0.0']*n, cached=['false']*n))

def good_labels(n=2):
    return pd.DataFrame(dict(prompt_id=['a', 'b'][:n], model=['m']*n, label=['answer']*n, judge=['rules']*n,
                             confidence=['0.9', '0.8'][:n], rationale=['']*n))

GOOD = {'prompts': good_prompts, 'responses': good_responses, 'labels': good_labels}

def csv_with(tmp_path, df, name='prompts.csv'):
    p = tmp_path/name
    df.to_csv(p, index=False)
    return p

def error_of(path, table):
    with pytest.raises(TableError) as e: read_table(path, table)
    return str(e.value)

def set_cell(df, row, col, value):
    df = df.copy(); df.loc[row, col] = value
    return df

def test_good_table_reads(tmp_path):
    assert len(read_table(csv_with(tmp_path, good_prompts()), 'prompts')) == 3

@pytest.mark.parametrize('change,expected', [
    (lambda df: df.drop(columns='category'), ('prompts.csv', "column 'category': missing column")),
    (lambda df: df.assign(catgory='privacy'), ("column 'catgory': unexpected column",)),
], ids=['missing column', 'unexpected column'])
def test_column_fault(tmp_path, change, expected):
    msg = error_of(csv_with(tmp_path, change(good_prompts())), 'prompts')
    assert all(s in msg for s in expected), msg

@pytest.mark.parametrize('table,row,col,value,expected', [
    ('prompts', 2, 'lang', 'english', ("row 3 (line 4), column 'lang'", "'english'")),
    ('prompts', 0, 'label', 'harmless', ("row 1 (line 2), column 'label'", 'safe, toxic')),
    ('prompts', 1, 'method', 'poem', ("row 2 (line 3), column 'method'", "'poem'")),
    ('prompts', 2, 'text', '   ', ("row 3 (line 4), column 'text': empty value",)),
    ('prompts', 2, 'prompt_id', 'privacy-001-base-en', ("row 3 (line 4), column 'prompt_id': duplicate key", 'privacy-001-base-en')),
    ('prompts', 0, 'text', 'caf\ufffd au lait', ("row 1 (line 2), column 'text': bad encoding",)),
    ('labels', 1, 'label', 'refused', ("labels.csv, row 2 (line 3), column 'label'", 'answer, partial, refuse, blocked, unscored')),
    ('responses', 1, 'finish_reason', 'content_filter', ("responses.csv, row 2 (line 3), column 'finish_reason'",)),
    ('responses', 0, 'latency_s', 'fast', ("row 1 (line 2), column 'latency_s': not a number",)),
    ('responses', 2, 'prompt_id', 'p0', ("row 3 (line 4), column 'prompt_id': duplicate key (prompt_id='p0', model='m')",)),
    ('responses', 1, 'cached', 'maybe', ("row 2 (line 3), column 'cached': not true/false",)),
], ids=['unknown language', 'unknown prompt label', 'unknown method', 'empty text', 'duplicate prompt_id',
        'replacement character', 'unknown reply label', 'unknown finish_reason', 'not a number',
        'duplicate response key', 'bad bool'])
def test_cell_fault(tmp_path, table, row, col, value, expected):
    msg = error_of(csv_with(tmp_path, set_cell(GOOD[table](), row, col, value), f'{table}.csv'), table)
    assert all(s in msg for s in expected), msg

def test_bad_encoding_latin1(tmp_path):
    p = tmp_path/'latin1.csv'
    text = good_prompts().to_csv(index=False).replace('How do I delete the data an app keeps about me? (1)', 'Où sont mes données? (1)')
    p.write_bytes(text.encode('latin-1'))
    msg = error_of(p, 'prompts')
    assert "latin1.csv, row 2 (line 3), column 'text': bad encoding" in msg

def test_invalid_jsonl_line(tmp_path):
    p = tmp_path/'prompts.jsonl'
    rows = good_prompts().to_dict('records')
    p.write_text(json.dumps(rows[0]) + '\n{"prompt_id": "x", "text": \n' + json.dumps(rows[2]) + '\n', encoding='utf-8')
    msg = error_of(p, 'prompts')
    assert 'prompts.jsonl, row 2' in msg and 'invalid JSON' in msg

def test_parquet_unknown_category(tmp_path):
    p = tmp_path/'prompts.parquet'
    set_cell(good_prompts(), 1, 'category', 'guns').to_parquet(p, index=False)
    msg = error_of(p, 'prompts')
    assert "prompts.parquet, row 2, column 'category'" in msg

def test_unsupported_format(tmp_path):
    with pytest.raises(ValueError, match=r'data\.xlsx: unsupported table format'): read_table(tmp_path/'data.xlsx', 'prompts')

def test_all_faults_listed(tmp_path):
    df = set_cell(set_cell(good_prompts(), 0, 'lang', 'xx'), 2, 'category', 'yy')
    msg = error_of(csv_with(tmp_path, df), 'prompts')
    assert '2 fault(s)' in msg and "row 1 (line 2), column 'lang'" in msg and "row 3 (line 4), column 'category'" in msg

def test_write_refuses_invalid_and_keeps_old_file(tmp_path):
    p = write_table(good_prompts(), tmp_path/'prompts.parquet', 'prompts')
    before = p.read_bytes()
    with pytest.raises(TableError): write_table(set_cell(good_prompts(), 0, 'label', 'nope'), p, 'prompts')
    assert p.read_bytes() == before and not list(tmp_path.glob('.*.tmp'))
