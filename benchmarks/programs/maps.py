"""CPython twin of maps.sns."""
N = 100000

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]


def show(m):
    return "{" + ", ".join(f"{k}: {v}" for k, v in m.items()) + "}"


def run(n):
    names = {}
    i = 0
    while i < n:
        names["k" + str(i)] = i
        i = i + 1
    total = 0
    for key in list(names):
        total = total + names[key]
    hits = 0
    i = 0
    while i < n:
        if ("k" + str(i * 2)) in names:
            hits = hits + 1
        i = i + 1
    squares = {}
    i = 0
    while i < n:
        squares[i] = i * i
        i = i + 1
    checked = 0
    i = n - 1
    while i >= 0:
        if squares[i] == i * i:
            checked = checked + 1
        i = i - 1
    counts = {}
    i = 0
    while i < n:
        word = WORDS[i % 7]
        counts[word] = counts.get(word, 0) + 1
        i = i + 1
    return (str(len(names)) + " " + str(total) + " " + str(hits) + " " + str(checked) + " "
            + show(counts))


print("result:", run(N))
