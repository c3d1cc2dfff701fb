"""CPython twin of closures.sns."""
N = 1000000


def make_counter(step):
    count = 0

    def next():
        nonlocal count
        count = count + step
        return count
    return next


def compose(f, g):
    def both(x):
        return f(g(x))
    return both


def make_adder(k):
    # A factory, because a Python def in a loop would share one late-bound k.
    def add(x):
        return x + k
    return add


def run(n):
    adders = []
    for k in range(10):
        adders.append(make_adder(k))
    counter = make_counter(3)
    shifted = compose(adders[1], adders[2])
    total = 0
    i = 0
    while i < n:
        total = (total + counter() + shifted(i) + adders[i % 10](i)) % 1000003
        i = i + 1
    return total


print("result:", run(N))
