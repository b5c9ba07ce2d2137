"""A fleet of 3 loopback servers, one killed with SIGKILL mid-run: every prompt answered once (counted at
the servers, in the table and in the cache), the dead server drained, and a rerun served from the cache."""
import sqlite3, threading
import pytest
from fault_server import start_process, get_stats
from orbench_ml.runner import run_batch, run_summary

N = 3000

@pytest.fixture
def fleet():
    servers = [start_process(latency=0.2, jitter=0.05, slots=32, lifetime=300) for _ in range(3)]
    yield servers
    for proc, _ in servers: proc.kill(); proc.wait()

def _answers_per_prompt(url):
    return {p: v[1] for p, v in get_stats(url)['prompts'].items()}

def test_one_server_killed_mid_run(fleet, tmp_path):
    urls = [f'{url}/v1' for _, url in fleet]
    model = 'openai-compatible:fleet-model@' + ','.join(urls)
    prompts = [f'fleet test prompt {i}' for i in range(N)]
    killer = threading.Timer(2.0, fleet[0][0].kill)
    killer.start()
    df = run_batch(prompts, model, cache=tmp_path/'replies.sqlite', concurrency=96, progress=False, timeout=10)
    killer.join()
    ends = run_summary(df)['endpoints']
    assert (df.finish_reason == 'stop').all(), df.finish_reason.value_counts()
    assert ends[urls[0]]['down'] and ends[urls[0]]['drains'] >= 1
    assert ends[urls[0]]['answered'] > 0                      # it did serve before it died
    survivors = [_answers_per_prompt(u.removesuffix('/v1')) for u in urls[1:]]
    assert max(a for s in survivors for a in s.values()) == 1             # no prompt answered twice by one server
    assert not set(survivors[0]) & set(survivors[1])                     # nor by both
    for u, s in zip(urls[1:], survivors): assert ends[u]['answered'] == sum(s.values())   # every answer received
    assert sum(e['answered'] for e in ends.values()) == N                 # each reply recorded once
    assert df.prompt_id.is_unique and df.response.str.startswith('Reply to: fleet test prompt').all()
    with sqlite3.connect(tmp_path/'replies.sqlite') as db: assert db.execute('SELECT count(*) FROM replies').fetchone()[0] == N
    before = sum(get_stats(u.removesuffix('/v1'))['requests'] for u in urls[1:])
    again = run_batch(prompts, model, cache=tmp_path/'replies.sqlite', progress=False)
    assert again.cached.all() and run_summary(again)['requests'] == 0
    assert sum(get_stats(u.removesuffix('/v1'))['requests'] for u in urls[1:]) == before

def test_dead_server_at_start_is_drained_by_the_preflight(fleet, tmp_path):
    urls = [f'{url}/v1' for _, url in fleet[:2]] + ['http://127.0.0.1:9/v1']   # nothing listens on port 9
    df = run_batch([f'p{i}' for i in range(200)], 'openai-compatible:m@' + ','.join(urls), cache=False, concurrency=32,
                   progress=False)
    ends = run_summary(df)['endpoints']
    assert (df.finish_reason == 'stop').all()
    assert ends[urls[2]] == dict(sent=0, answered=0, failed=0, drains=1, down=True)
    assert ends[urls[0]]['answered'] + ends[urls[1]]['answered'] == 200
