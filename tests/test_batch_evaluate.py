"""The main job in batch mode, end to end: `papermill nbs/06_evaluate.ipynb -p mode batch` against the loopback
fake of the OpenAI batch API, then the same run again, which makes no call."""
import pandas as pd

from batch_server import serving
from test_stages_e2e import papermill, scratch_env

def test_main_job_in_batch_mode_then_its_rerun_makes_no_call(tmp_path):
    with serving(duration=0.05) as srv:
        model = f'openai-compatible:batch-fake@{srv.url}/v1'
        for run in (1, 2):
            r = papermill('06_evaluate.ipynb', tmp_path/f'06-{run}.ipynb', scratch_env(tmp_path), ('model', model),
                          ('limit', 30), ('judge', 'rules'), ('mode', 'batch'))
            assert r.returncode == 0, r.stderr[-3000:]
            if run == 1: calls = sum(srv.stats()['calls'].values())
        st = srv.stats()
        assert (st['batches'], st['submitted'], st['duplicated']) == (1, 30, 0) and sum(st['calls'].values()) == calls
    res = next((tmp_path/'results').glob('openai-compatible_batch-fake_*'))/'v2'/'filtered'/'limit=30'
    responses = pd.read_parquet(res/'responses.parquet')
    assert len(responses) == 30 and responses.cached.all() and responses.response.str.startswith('Batch reply to').all()
    assert '"mode": "batch"' in (res/'run.json').read_text()
