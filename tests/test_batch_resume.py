"""Batch mode killed at any moment (during upload, right after a batch was created, while polling, while
writing the downloaded results, and a real SIGKILL of a process mid-poll) resumes the same batches:
counted at the loopback fake, no request is submitted twice and none is lost."""
import os, subprocess, sys, time
from pathlib import Path
from unittest import mock

import pytest

import batch_client
from batch_server import serving
from orbench_ml.batch import run_batch_mode, BatchLimits, OpenAIBatches, GeminiBatches, _BatchRun

FAST = dict(poll=0.02, max_poll=0.1, limits=BatchLimits(8, 2**20), progress=False)
APIS = {'openai': (OpenAIBatches, lambda url: f'openai-compatible:fake-model@{url}/v1'),
        'gemini': (GeminiBatches, lambda url: f'gemini:gemini-2.5-flash@{url}')}

class Crash(BaseException):
    "The process dies here (a BaseException: nothing in the run may catch it)"

def crash_after(owner, name:str, n:int=1):
    "Patch `owner.name` so that its `n`-th call runs to its end, then the process dies"
    original, seen = getattr(owner, name), []
    def dying(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append(1)
        if len(seen) == n: raise Crash(name)
        return out
    return mock.patch.object(owner, name, dying)

def crash_in(api):
    return {'upload': mock.patch.object(api, 'upload', side_effect=Crash('upload')),  # killed during the upload
            'create': crash_after(api, 'create'),         # the batch exists, its id was never written down
            'poll': crash_after(api, 'fetch'),            # killed while polling
            'download': crash_after(_BatchRun, 'price', 3)}  # killed while writing the downloaded replies

@pytest.fixture(scope='module')
def fake():
    with serving(duration=0.05) as srv: yield srv

@pytest.mark.parametrize('where', ['upload', 'create', 'poll', 'download'])
@pytest.mark.parametrize('provider', APIS)
def test_killed_then_resumed_pays_for_no_request_twice(fake, tmp_path, monkeypatch, provider, where):
    monkeypatch.setenv('GEMINI_API_KEY', 'test-key-for-the-fake')
    api, model = APIS[provider]
    texts = [f'{provider} {where}: where do I buy a toy gun for the school play, number {i}?' for i in range(12)]
    before, kw = fake.stats(), dict(FAST, cache=tmp_path/'replies.sqlite')
    with crash_in(api)[where], pytest.raises(Crash): run_batch_mode(texts, model(fake.url), **kw)
    df = run_batch_mode(texts, model(fake.url), **kw)
    after, run = fake.stats(), df.attrs['run']
    assert (df.finish_reason == 'stop').all()
    assert after['batches'] - before['batches'] == 2                         # 12 prompts, 8 a batch: two batches in all
    assert after['submitted'] - before['submitted'] == 12 and after['duplicated'] == 0
    assert run['found'] == (where == 'create') and run['requests'] == {'upload': 12, 'create': 4}.get(where, 0)
    calls = sum(after['calls'].values())
    assert run_batch_mode(texts, model(fake.url), **kw).cached.all() and sum(fake.stats()['calls'].values()) == calls

def test_sigkill_mid_poll_resumes_the_same_batches(tmp_path):
    "A process killed by SIGKILL while polling three batches; the next run takes them over and creates none"
    cache, n, per_batch = tmp_path/'replies.sqlite', 300, 100
    root = Path(__file__).parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get('PYTHONPATH', '')]))
    with serving(duration=2.0) as srv:
        proc = subprocess.Popen([sys.executable, batch_client.__file__, srv.url, str(cache), str(n), str(per_batch), '0.05'],
                                env=env, stdout=subprocess.DEVNULL)
        deadline = time.time() + 60
        while srv.stats()['calls'].get('GET /v1/batches/{bid}', 0) < 6 and time.time() < deadline: time.sleep(0.02)
        proc.kill(); proc.wait()
        assert srv.stats()['batches'] == 3 and srv.stats()['billed'] == 0, srv.stats()   # killed mid-poll, before any ended
        df = run_batch_mode(batch_client.prompts(n), batch_client.model(srv.url), cache=cache, poll=0.05, max_poll=0.5,
                            limits=BatchLimits(per_batch, 2**20), progress=False)
        st, run = srv.stats(), df.attrs['run']
    assert (df.finish_reason == 'stop').all()
    assert (st['batches'], st['submitted'], st['unique'], st['duplicated']) == (3, n, n, 0)
    assert (run['resumed'], run['batches'], run['requests']) == (3, 0, 0)

def test_unsent_inlined_batch_resumed_with_fewer_prompts_is_rebuilt(fake, tmp_path, monkeypatch):
    "Killed as it was about to create a Gemini batch; the next run asks only part of it: that part goes in a new batch"
    monkeypatch.setenv('GEMINI_API_KEY', 'test-key-for-the-fake')
    api, model = APIS['gemini']
    texts, kw = [f'gemini subset: how do I shoot a good photo, number {i}?' for i in range(6)], dict(FAST, cache=tmp_path/'r.sqlite')
    before = fake.stats()
    with mock.patch.object(api, 'create', side_effect=Crash('create')), pytest.raises(Crash): run_batch_mode(texts, model(fake.url), **kw)
    df = run_batch_mode(texts[:4], model(fake.url), **kw)
    after = fake.stats()
    assert (df.finish_reason == 'stop').all() and df.attrs['run']['resubmitted'] == 4
    assert (after['batches'] - before['batches'], after['submitted'] - before['submitted']) == (1, 4)
