"""CPython twin of arrays.sns."""
N = 540000


def run(n):
    xs = []
    i = 0
    while i < n:
        xs.append((i * 7) % 101)
        i = i + 1
    total = 0
    for x in xs:
        total = total + x
    k = 0
    while k < len(xs):
        xs[k] = xs[k] + k % 3
        k = k + 1
    pairs = []
    for x in xs:
        pairs.append([x, x % 10])
    tens = 0
    j = len(pairs) - 1
    while j >= 0:
        tens = tens + pairs[j][1]
        j = j - 1
    return str(total) + " " + str(tens) + " " + str(xs[-1]) + " " + str(len(pairs))


print("result:", run(N))
