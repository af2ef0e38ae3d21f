"""Memory is released when Python objects die: 10,000 small training steps
(tensors from numpy, forward, backward, optimizer step, mark_step, reads)
leave the process's resident set and the library's live tensor count flat."""
import gc

import numpy as np

import lazytensor as lt


def rss_kib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import resource
    return pages * resource.getpagesize() // 1024


def step(model, opt, x, y, read):
    loss = lt.nn.cross_entropy(model(lt.from_numpy(x)), lt.from_numpy(y))
    loss.backward()
    opt.step()
    s = loss.detach() * 1.0
    lt.mark_step()
    if read:
        return s.item(), (s + 1.0)[None].numpy()
    return None


def test_rss_flat_over_10000_steps():
    gc.collect()
    lt.manual_seed(5)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = np.array([0, 1, 1, 0])
    model = lt.nn.Sequential(lt.nn.Linear(3, 4), lt.nn.ReLU(), lt.nn.Linear(4, 2))
    opt = lt.nn.SGD(model.parameters(), lr=0.01)
    lt.mark_step()
    for i in range(500):  # warm: compiles, pools and caches reach their size
        step(model, opt, x, y, i % 50 == 0)
    gc.collect()
    live0, rss0 = lt.live_tensors(), rss_kib()
    for i in range(10000):
        step(model, opt, x, y, i % 50 == 0)
    gc.collect()
    live1, rss1 = lt.live_tensors(), rss_kib()
    assert live1 == live0, (live0, live1)
    # a leak of even one 16-byte tensor header per step would be 160 KiB;
    # a tensor object (with its node) per step, several MiB
    assert rss1 - rss0 < 4096, (rss0, rss1)


def test_layers_and_optimizers_release():
    gc.collect()
    live0 = lt.live_tensors()
    for _ in range(50):
        m = lt.nn.Sequential(lt.nn.Linear(3, 4), lt.nn.Linear(4, 2), lt.nn.Embedding(3, 2))
        o = lt.nn.Adam(m.parameters())
        del m, o
    lt.mark_step()
    gc.collect()
    assert lt.live_tensors() == live0
