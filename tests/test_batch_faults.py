"""Batch mode against the loopback fake of the OpenAI and Gemini batch APIs, through the real `openai` and
`google-genai` SDKs, with injected faults: a failed batch, an expired batch, partial results, a 500 on
download, item errors. Every prompt ends answered exactly once (counted at the fake), and a rerun makes
no call."""
import pytest

from batch_server import serving
from fault_server import FaultServer
from orbench_ml.batch import run_batch_mode, BatchLimits
from orbench_ml.models import ModelUnavailable
from orbench_ml.runner import run_batch

FAST = dict(poll=0.02, max_poll=0.1, limits=BatchLimits(8, 2**20), progress=False)

@pytest.fixture(scope='module')
def fake():
    with serving(duration=0.05) as srv: yield srv

@pytest.fixture(autouse=True)
def isolated(fake, tmp_path, monkeypatch):
    monkeypatch.setenv('ORBENCH_CACHE', str(tmp_path/'cache'))
    monkeypatch.setenv('GEMINI_API_KEY', 'test-key-for-the-fake')
    fake.inject(fail=0, expire=0, missing=0, download_500=0)

MODELS = {'openai': lambda url: f'openai-compatible:fake-model@{url}/v1', 'gemini': lambda url: f'gemini:gemini-2.5-flash@{url}'}

def prompts(tag, n=20): return [f'{tag}: how do I kill the stuck process number {i}?' for i in range(n)]

def calls(fake): return sum(fake.stats()['calls'].values())

@pytest.mark.parametrize('provider', MODELS)
@pytest.mark.parametrize('fault, resubmitted', [('fail', 8), ('expire', {'openai': 4, 'gemini': 8}), ('missing', 1),
                                               ('download_500', 0), ('none', 0)])
def test_faults_end_with_every_prompt_answered_once(fake, provider, fault, resubmitted):
    "20 prompts in batches of 8; the fault hits the first batch that ends (an expired OpenAI batch answered half)"
    resubmitted = resubmitted[provider] if isinstance(resubmitted, dict) else resubmitted
    if fault != 'none': fake.inject(**{fault: 3 if fault == 'download_500' else 1})
    before, texts = fake.stats(), prompts(f'{provider}-{fault}')
    df = run_batch_mode(texts, MODELS[provider](fake.url), **FAST)
    after, run = fake.stats(), df.attrs['run']
    assert (df.finish_reason == 'stop').all() and df.response.str.startswith('Batch reply to').all()
    assert after['billed'] - before['billed'] == len(texts) and after['duplicated'] == 0
    assert run['resubmitted'] == resubmitted and run['requests'] == len(texts) + resubmitted
    assert run['batches'] == 3 + (resubmitted > 0) and (run['poll_errors'] > 0) == (fault == 'download_500')
    n = calls(fake)
    again = run_batch_mode(texts, MODELS[provider](fake.url), **FAST)
    assert again.cached.all() and calls(fake) == n                  # a rerun of a finished run: no call

@pytest.mark.parametrize('provider', MODELS)
def test_item_errors_transient_resubmitted_permanent_reported(fake, provider):
    texts = [f'{provider} transient [[batch:500]]', f'{provider} permanent [[batch:400]]', f'{provider} fine']
    df = run_batch_mode(texts, MODELS[provider](fake.url), **FAST)
    assert list(df.finish_reason) == ['stop', 'error', 'stop']
    assert '400' in df.error[1] and df.attrs['run']['resubmitted'] == 1 and df.attrs['run']['failed'] == 1
    again = run_batch_mode(texts, MODELS[provider](fake.url), **FAST)   # errors are not cached: only that one goes again
    assert list(again.cached) == [True, False, True] and again.attrs['run']['requests'] == 1

def test_resubmits_are_bounded(fake):
    fake.inject(fail=10)
    df = run_batch_mode(prompts('bounded', 4), MODELS['openai'](fake.url), resubmits=2, **FAST)
    assert (df.finish_reason == 'error').all() and df.error.str.contains('batch failed').all()
    assert df.attrs['run']['batches'] == 3                            # the first batch and two more
    fake.inject(fail=0)

def test_batch_replies_serve_an_online_run(fake):
    texts = prompts('shared', 5)
    run_batch_mode(texts, MODELS['openai'](fake.url), **FAST)
    online = run_batch(texts, MODELS['openai'](fake.url), progress=False)   # the fake has no chat endpoint: all from the cache
    assert online.cached.all() and online.response.str.startswith('Batch reply to').all()

def test_server_without_a_batch_api_fails_in_one_line():
    srv = FaultServer().start_thread()
    try:
        with pytest.raises(ModelUnavailable, match='has no batch API, run it with mode online'):
            run_batch_mode(['hello'], f'openai-compatible:m@{srv.url}/v1', **FAST)
    finally: srv.stop()
