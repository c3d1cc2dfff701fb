"""CPython twin of strings.sns."""
N = 500000

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def run(n):
    lines = []
    line = ""
    i = 0
    while i < n:
        word = WORDS[i % 5] + str(i % 100)
        if len(line) + len(word) > 60:
            lines.append(line)
            line = word
        elif line == "":
            line = word
        else:
            line = line + " " + word
        i = i + 1
    lines.append(line)
    chars = 0
    spaces = 0
    for text in lines:
        for c in text:
            chars = chars + 1
            if c == " ":
                spaces = spaces + 1
    return str(len(lines)) + " " + str(chars) + " " + str(spaces) + " " + lines[-1]


print("result:", run(N))
