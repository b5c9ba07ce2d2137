"""The persistent cache: a rerun makes zero requests, identical prompts are asked once, generation
parameters are part of the key, and a run killed with SIGKILL mid-way resumes without losing or
duplicating anything (counted at the server)."""
import os, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import pytest

from fault_server import FaultServer, get_stats, reset
from orbench_ml.models import resolve
from orbench_ml.runner import run_batch, cache_key, SYSTEM_PROMPT

@pytest.fixture(scope='module')
def server():
    srv = FaultServer(latency=0.02, lifetime=300).start_thread()
    yield srv
    srv.stop()

@pytest.fixture(autouse=True)
def fresh(server): reset(server.url)

def name(server): return f'openai-compatible:cache-model@{server.url}/v1'

def test_rerun_makes_zero_requests(server, tmp_path):
    prompts = [f'cache me {i}' for i in range(50)]
    first = run_batch(prompts, name(server), cache=tmp_path/'c.sqlite', progress=False)
    assert not first.cached.any() and get_stats(server.url)['requests'] == 50
    again = run_batch(prompts, name(server), cache=tmp_path/'c.sqlite', progress=False)
    assert again.cached.all() and get_stats(server.url)['requests'] == 50
    assert again.response.tolist() == first.response.tolist()
    assert again.attrs['run']['requests'] == 0 and again.attrs['run']['cached'] == 50

def test_identical_prompts_are_asked_once(server, tmp_path):
    df = run_batch(['same', 'same', 'other', 'same'], name(server), cache=tmp_path/'c.sqlite', progress=False)
    assert df.response.tolist() == ['Reply to: same', 'Reply to: same', 'Reply to: other', 'Reply to: same']
    assert get_stats(server.url)['requests'] == 2

def test_parameters_and_system_prompt_are_part_of_the_key(server, tmp_path):
    kw = dict(cache=tmp_path/'c.sqlite', progress=False)
    run_batch(['q'], name(server), **kw)
    run_batch(['q'], name(server), temperature=0.7, **kw)
    run_batch(['q'], name(server), system_prompt='Be brief.', **kw)
    run_batch(['q'], name(server), max_tokens=64, **kw)
    run_batch(['q'], name(server), **kw)                                  # cached
    assert get_stats(server.url)['requests'] == 4

def test_cache_disabled(server):
    run_batch(['no cache'], name(server), cache=False, progress=False)
    run_batch(['no cache'], name(server), cache=False, progress=False)
    assert get_stats(server.url)['requests'] == 2

CHILD = """
import sys
from orbench_ml.runner import run_batch
run_batch([f'kill test prompt {i}' for i in range(int(sys.argv[3]))], sys.argv[1], cache=sys.argv[2], concurrency=8, progress=False)
"""

def cached_count(path):
    if not Path(path).exists(): return 0
    try:
        with sqlite3.connect(f'file:{path}?mode=ro', uri=True, timeout=5) as db:
            return db.execute('SELECT count(*) FROM replies').fetchone()[0]
    except sqlite3.OperationalError: return 0   # the table is not created yet

def test_sigkill_midway_then_resume(tmp_path):
    n = 400
    srv = FaultServer(latency=0.05, lifetime=120).start_thread()
    try:
        model, cache = f'openai-compatible:kill-model@{srv.url}/v1', tmp_path/'replies.sqlite'
        child = subprocess.Popen([sys.executable, '-c', CHILD, model, str(cache), str(n)])
        deadline = time.time() + 60
        while cached_count(cache) < n // 4 and time.time() < deadline and child.poll() is None: time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL); child.wait()
        assert child.returncode == -signal.SIGKILL, 'the run ended before it could be killed'
        first = get_stats(srv.url)['prompts']
        spec, params = resolve(model), dict(temperature=0.0, max_tokens=512)
        prompts = [f'kill test prompt {i}' for i in range(n)]
        key = {p: cache_key(spec, [{'role': 'system', 'content': SYSTEM_PROMPT}, {'role': 'user', 'content': p}], params) for p in prompts}
        with sqlite3.connect(cache) as db: kept = {k for (k,) in db.execute('SELECT key FROM replies')}
        saved = {p for p in prompts if key[p] in kept}
        assert n // 4 <= len(saved) < n, f'killed after {len(saved)} of {n} replies'
        # every reply the dead run received before the kill is on disk (at most the 8 in flight are lost)
        assert sum(v[1] for v in first.values()) - len(saved) <= 8

        df = run_batch(prompts, model, cache=cache, concurrency=8, progress=False)
        after = get_stats(srv.url)['prompts']
        asked_again = {p for p in prompts if after[p][0] > first.get(p, [0, 0])[0]}
        assert asked_again == set(prompts) - saved                     # only the missing ones
        assert sum(after[p][0] - first.get(p, [0, 0])[0] for p in prompts) == n - len(saved)
        assert (df.finish_reason == 'stop').all() and df.prompt_id.is_unique and len(df) == n   # none lost
        assert df.cached.sum() == len(saved)
        with sqlite3.connect(cache) as db:
            assert db.execute('SELECT count(*), count(DISTINCT key) FROM replies').fetchone() == (n, n)  # none duplicated
        assert all(after[p][1] == 1 for p in saved)                   # a saved reply was never asked for again
    finally: srv.stop()
