"""CPython twin of fib.sns."""
N = 32


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


print("result:", fib(N))
