"""CPython twin of loops.sns."""
N = 1800000


def run(n):
    acc = 0
    odd = 0
    i = 0
    while i < n:
        if i % 3 == 0:
            acc = acc + i * 2
        elif i % 5 == 0:
            acc = acc - i
        else:
            acc = acc + 7
        if acc % 2 == 1:
            odd = odd + 1
        acc = acc % 1000003
        i = i + 1
    return str(acc) + " " + str(odd)


print("result:", run(N))
