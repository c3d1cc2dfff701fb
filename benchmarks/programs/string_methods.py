"""CPython twin of string_methods.sns."""
N = 450000

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def run(n):
    words = []
    i = 0
    while i < n:
        words.append(WORDS[i % 5] + str(i % 100))
        i = i + 1
    text = " ".join(words)
    starts = 0
    nines = 0
    at = 0
    for word in text.split(" "):
        shout = word.upper()
        if shout.startswith("AL"):
            starts = starts + 1
        if "9" in word:
            nines = nines + 1
        at = at + shout.lower().find("a")
    lines = []
    i = 0
    while i < n:
        lines.append("  " + words[i].replace("a", "4").rjust(12, ".") + " \n")
        i = i + 1
    kept = 0
    for line in lines:
        if line.strip().endswith("4"):
            kept = kept + 1
    return (str(starts) + " " + str(nines) + " " + str(at) + " " + str(kept) + " "
            + lines[n - 1].strip())


print("result:", run(N))
