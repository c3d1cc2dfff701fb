# callbacks: the CPython twin of callbacks.sns (map, filter, reduce, sorted with a key).
from functools import reduce

N = 600000


def double(x):
    return x * 2 + 1


def odd(x):
    return x % 3 != 0


def add(acc, x):
    return (acc + x) % 1000003


def key(x):
    return (x * 7919) % 10007


def run(n):
    xs = []
    i = 0
    while i < n:
        xs.append(i)
        i = i + 1
    ys = list(map(double, xs))
    zs = list(filter(odd, ys))
    total = reduce(add, zs, 0)
    ordered = sorted(zs, key=key)
    return str(total) + " " + str(len(zs)) + " " + str(ordered[0]) + " " + str(ordered[len(ordered) - 1])


print("result:", run(N))
