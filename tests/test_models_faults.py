"""The batch runner against a fault-injecting server on 127.0.0.1, through the real `openai` and
`google-genai` clients: every fault kind is retried to an answer, Retry-After is honoured, keys rotate,
concurrency and rate limits hold, blocks and surviving errors are explicit, and keys never leak."""
import time
import pandas as pd
import pytest

from fault_server import FaultServer, get_stats, reset
from orbench_ml.models import ModelUnavailable
from orbench_ml.runner import run_batch, ask, ReplyCache

FAST = dict(retries=3, backoff=0.01, timeout=2, progress=False)

@pytest.fixture(scope='module')
def server():
    srv = FaultServer(latency=0.01, hang=5, retry_after=0.5, lifetime=300).start_thread()
    yield srv
    srv.stop()

@pytest.fixture(autouse=True)
def isolated(server, tmp_path, monkeypatch):
    monkeypatch.setenv('ORBENCH_CACHE', str(tmp_path/'cache'))
    monkeypatch.delenv('OPENAI_COMPATIBLE_API_KEY', raising=False)
    reset(server.url)

def oai(server, m='fault-model'): return f'openai-compatible:{m}@{server.url}/v1'
def gem(server, m='gemini-2.5-flash'): return f'gemini:{m}@{server.url}'

@pytest.mark.parametrize('kind', ['429', '500', 'drop', 'timeout', 'malformed'])
def test_each_fault_is_retried_to_an_answer(server, kind):
    text = f'Please answer this [[fault:{kind}*1]]'
    df = run_batch([text], oai(server), **{**FAST, 'timeout': 0.5})
    assert df.finish_reason[0] == 'stop' and df.response[0].startswith('Reply to: Please answer this')
    assert get_stats(server.url)['prompts'][text] == [2, 1]      # one fault, one answer
    assert df.input_tokens[0] > 0 and df.output_tokens[0] > 0 and df.cost_usd[0] == 0.0

def test_retry_after_is_honoured(server):
    t0 = time.perf_counter()
    df = run_batch(['Wait for it [[fault:429*1]]'], oai(server), **FAST)   # server says Retry-After: 0.5
    assert df.finish_reason[0] == 'stop'
    assert time.perf_counter() - t0 >= 0.5

def test_content_filter_is_blocked_and_not_retried(server):
    text = 'Something filtered [[fault:filter]]'
    df = run_batch([text, 'A normal question'], oai(server), **FAST)
    assert df.finish_reason.tolist() == ['blocked', 'stop']
    assert pd.isna(df.response[0]) and 'content_filter' in df.error[0]
    assert get_stats(server.url)['prompts'][text] == [1, 1]
    assert ask(oai(server), [text, 'A normal question'], **FAST) == [None, 'Reply to: A normal question']

def test_surviving_error_is_explicit_and_not_cached(server, tmp_path):
    text = 'Always broken [[fault:500]]'
    cache = tmp_path/'c.sqlite'
    df = run_batch([text, 'fine'], oai(server), cache=cache, **FAST)
    assert df.finish_reason.tolist() == ['error', 'stop']
    assert 'InternalServerError' in df.error[0] and pd.isna(df.response[0])
    assert df.attrs['run']['failed'] == 1 and df.attrs['run']['requests'] == 4 + 1
    c = ReplyCache(cache); assert len(c) == 1; c.close()
    again = run_batch([text, 'fine'], oai(server), cache=cache, **FAST)    # the error is asked again, the answer is not
    assert again.cached.tolist() == [False, True]
    assert get_stats(server.url)['prompts'][text][0] == 8

def test_keys_rotate(server, monkeypatch):
    monkeypatch.setenv('OPENAI_COMPATIBLE_API_KEY', 'test-key-a, test-key-b,test-key-c')
    run_batch([f'rotation {i}' for i in range(30)], oai(server), cache=False, **FAST)
    keys = get_stats(server.url)['keys']
    assert set(keys) == {'test-key-a', 'test-key-b', 'test-key-c'} and min(keys.values()) >= 9

def test_429_on_one_key_retries_on_the_next(server, monkeypatch):
    monkeypatch.setenv('OPENAI_COMPATIBLE_API_KEY', 'test-key-a,test-key-b')
    df = run_batch(['rotate after 429 [[fault:429*1]]'], oai(server), cache=False, **{**FAST, 'concurrency': 1})
    assert df.finish_reason[0] == 'stop'
    assert get_stats(server.url)['keys'] == {'test-key-a': 1, 'test-key-b': 1}

def test_concurrency_limit(server):
    srv = FaultServer(latency=0.05, lifetime=60).start_thread()
    try:
        run_batch([f'concurrent {i}' for i in range(40)], oai(srv), cache=False, concurrency=4, progress=False)
        assert get_stats(srv.url)['max_inflight'] == 4
    finally: srv.stop()

@pytest.mark.parametrize('n,limit,least_s', [
    (15, dict(rpm=600), 0.45),                 # 10 per second: the first 10 pass at once, the next 5 are paced at 0.1 s
    (12, dict(tpm=6000, max_tokens=5), 0.9),   # 100 tokens/s; each request is estimated at ~20 tokens (characters/3 + max_tokens)
])
def test_rate_limits(server, n, limit, least_s):
    t0 = time.perf_counter()
    df = run_batch([f'rate limited {i}' for i in range(n)], oai(server), cache=False, **{**FAST, **limit})
    assert (df.finish_reason == 'stop').all()
    assert time.perf_counter() - t0 >= least_s

def test_gemini_outcomes(server, monkeypatch):
    monkeypatch.setenv('GEMINI_API_KEY', 'test-gemini-key')
    texts = ['Hello Gemini', 'Unsafe looking [[fault:filter]]', 'Blocked prompt [[fault:promptblock]]',
             'Busy [[fault:429*1]]', 'Broken [[fault:500*2]]', 'Dropped [[fault:drop*1]]', 'Garbled [[fault:malformed*1]]',
             'Always down [[fault:500]]']
    df = run_batch(texts, gem(server), **FAST)
    assert df.finish_reason.tolist() == ['stop', 'blocked', 'blocked', 'stop', 'stop', 'stop', 'stop', 'error']
    assert 'SAFETY' in df.error[1] and 'prompt blocked: SAFETY' in df.error[2]
    assert df.response[0] == 'Reply to: Hello Gemini' and df.input_tokens[0] > 0
    assert df.cost_usd[0] > 0                  # gemini-2.5-flash has a price in data/models.csv
    assert get_stats(server.url)['keys'] == {'test-gemini-key': 1+1+1+2+3+2+2+4}

def test_gemini_max_tokens_is_length(server, monkeypatch):
    monkeypatch.setenv('GEMINI_API_KEY', 'test-gemini-key')
    df = run_batch(['one two three four five six seven'], gem(server), max_tokens=3, cache=False, **FAST)
    assert df.finish_reason[0] == 'length' and df.output_tokens[0] == 3

def test_same_failure_everywhere_stops_early(server, monkeypatch):
    monkeypatch.setenv('OPENAI_COMPATIBLE_API_KEY', 'test-key-rejected')
    with pytest.raises(ModelUnavailable, match='first 20 requests all failed') as e:
        run_batch([f'unauthorised {i} [[fault:401]]' for i in range(200)], oai(server), cache=False, **{**FAST, 'concurrency': 4})
    assert 'test-key-rejected' not in str(e.value) and '[REDACTED]' in str(e.value)
    assert get_stats(server.url)['requests'] < 40
