"""The reserved words of Sense (spec 2.4): one list for the compiler's lexer and the highlighter."""

# In the order the spec lists them.
KEYWORDS = (
    "def", "return", "returns", "if", "else", "while", "for", "in", "break", "continue",
    "true", "false", "nil", "import", "from", "as", "python", "set", "local", "session",
    "agent", "action", "reversible", "irreversible", "requires", "approval", "policy",
    "allow", "deny", "test", "tool", "memory", "async", "persistent", "model", "and", "or",
    "not",
)
