"""Keys never leak: run notebooks with papermill and fake keys in the environment, against a server that
echoes the key it was given in its error messages (as some providers do), with every log at DEBUG going
to a file; then grep the output notebook, the tables, the cache and the logs for the keys."""
import json, os, subprocess, sys
from pathlib import Path
import nbformat
import papermill as pm
import pytest

from fault_server import FaultServer, get_stats

TESTS = Path(__file__).parent
ROOT = TESTS.parent
KEYS = {'OPENAI_COMPATIBLE_API_KEY': 'sk-fake-openai-compat-0123456789abcdef,zz-plain-looking-key-98765',
        'GEMINI_API_KEY': 'gemini-fake-key-55555-not-a-pattern',
        'OPENAI_API_KEY': 'sk-fake-openai-ABCDEFGH12345678',
        'DEEPSEEK_API_KEY': 'ds-fake-key-31415926535'}
SECRETS = [k for v in KEYS.values() for k in v.split(',')]

CELLS = [
    ("parameters", "url = ''\nlog_path = ''\nout_dir = ''"),
    (None, """import logging
logging.basicConfig(filename=log_path, level=logging.DEBUG, force=True)   # every library's logs, at DEBUG
from pathlib import Path
from orbench_ml.core import write_table
from orbench_ml.models import resolve, ModelUnavailable\nfrom orbench_ml.runner import run_batch, run_summary
texts = ['A normal question', 'Echo my key [[fault:401]]', 'Server trouble [[fault:500]]', 'Filtered [[fault:filter]]']
df = run_batch(texts, f'openai-compatible:leak-model@{url}/v1', cache=Path(out_dir)/'replies.sqlite', retries=1, backoff=0.01, timeout=5)
write_table(df, Path(out_dir)/'responses.csv', 'responses'); write_table(df, Path(out_dir)/'responses.jsonl', 'responses')
print(df.to_string()); print(df.error.tolist()); print(run_summary(df)); print(resolve('gemini-2.5-flash'))"""),
    (None, """g = run_batch(['Gemini, echo my key [[fault:401]]', 'Hello'], f'gemini:gemini-2.5-flash@{url}', cache=Path(out_dir)/'replies.sqlite', retries=1, backoff=0.01)
print(g.to_string()); print(g.error.tolist())"""),
    (None, """try: run_batch([f'rejected {i} [[fault:401]]' for i in range(30)], f'openai-compatible:leak-model@{url}/v1', cache=False, retries=0)
except ModelUnavailable as e: print('ModelUnavailable:', e); logging.getLogger('orbench_ml.models').error('stopped: %s', e)"""),
    (None, "raise_in_output = run_batch(['Echo my key [[fault:401]]'], f'openai-compatible:leak-model@{url}/v1', cache=False, retries=0, progress=False)\nraise RuntimeError(raise_in_output.error[0])"),
]

def make_notebook(path):
    nb = nbformat.v4.new_notebook()
    for tag, src in CELLS:
        cell = nbformat.v4.new_code_cell(src)
        if tag: cell.metadata['tags'] = [tag]
        nb.cells.append(cell)
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    nbformat.write(nb, path)

def leaks_in(paths):
    found = []
    for p in paths:
        data = Path(p).read_bytes()
        found += [f'{p}: {s}' for s in SECRETS if s.encode() in data]
    return found

@pytest.fixture
def keyed_env(monkeypatch):
    for k, v in KEYS.items(): monkeypatch.setenv(k, v)

def test_no_key_in_notebook_tables_cache_or_logs(tmp_path, keyed_env):
    srv = FaultServer(lifetime=120).start_thread()
    try:
        src, out, log = tmp_path/'leak.ipynb', tmp_path/'leak.out.ipynb', tmp_path/'run.log'
        make_notebook(src)
        with pytest.raises(pm.PapermillExecutionError) as e:   # the last cell raises with a (redacted) provider error in it
            pm.execute_notebook(str(src), str(out), parameters=dict(url=srv.url, log_path=str(log), out_dir=str(tmp_path)),
                                kernel_name='python3', progress_bar=False, cwd=str(tmp_path))
        assert 'Incorrect API key provided: [REDACTED]' in str(e.value)
        seen = get_stats(srv.url)['keys']
        assert {'sk-fake-openai-compat-0123456789abcdef', 'zz-plain-looking-key-98765', KEYS['GEMINI_API_KEY']} <= set(seen), \
            'the keys must really have been sent, or this test proves nothing'
    finally: srv.stop()
    files = [p for p in tmp_path.iterdir() if p.is_file() and p != src]
    assert {'leak.out.ipynb', 'run.log', 'responses.csv', 'responses.jsonl', 'replies.sqlite'} <= {p.name for p in files}
    text = out.read_text() + log.read_text()
    assert text.count('[REDACTED]') >= 4                    # the echoed keys were there, and redacted
    assert leaks_in(files) == [] and SECRETS[0] not in str(e.value)

@pytest.mark.parametrize('notebook', ['01_models', '01a_runner'])
def test_no_key_in_the_models_notebook_output(tmp_path, keyed_env, notebook):
    out = tmp_path/f'{notebook}.out.ipynb'
    pm.execute_notebook(str(ROOT/'nbs'/f'{notebook}.ipynb'), str(out), kernel_name='python3', progress_bar=False,
                        cwd=str(ROOT/'nbs'))
    assert leaks_in([out]) == []
