"""reduce.py: a failing .tra program made small, keeping its failure.

    small = reduce(work, text, seed, block, finding, seconds, Check, signature)

The failure is the finding's signature (difftest.signature: its kind, the
configuration and the message without locations; of a failed run, its exit
status and message, numbers masked: keep_key).  A candidate keeps it
when Check finds a finding of the same signature; only the configurations
the finding names are run (a crash or a rejection: that level's trac -S
alone).  The passes, repeated until none changes the program or the time is
up:
  1. delete lines: statements, declarations, outputs, prints, whole repeat
     blocks (halves, quarters, ... then one at a time);
  2. unwrap a repeat block (its body stays);
  3. simplify expressions: a sub-expression replaced by one of its operands
     (a call by its argument, a reduction by its body, a binary operation
     by either side, where by a branch), a number by 1;
  4. smaller sizes and repeat counts.
`#@` lines stay (they describe the inputs; one about a deleted input is
dropped at the end).
"""
import re
import time

TOKEN = re.compile(r"\s*(\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|\*\*|<=|>=|==|!=|"
                   r"[A-Za-z_]\w*|\S)")


def configs_of(finding):
    """The levels and rank counts a finding needs, and whether -S is enough."""
    kind = finding[0]
    if kind in ("crash", "reject", "hang") and str(finding[1]).startswith("trac -O"):
        return [int(finding[1][7:])], [1], True
    levels, ranks = set(), set()
    for f in finding[1:3]:
        m = re.match(r"[OI](\d)/(\d)", str(f))
        if m:
            levels.add(int(m.group(1)))
            ranks.add(int(m.group(2)))
    if not levels:
        return [0, 1, 2], [1, 2, 3], False
    levels.add(0)               # the reference run, O0 on one rank
    ranks.add(1)
    return sorted(levels), sorted(ranks), False


def keep_key(signature, f):
    """What a candidate must keep of finding f: its signature, but of a run
    that fails, neither which configuration failed first (only the ones the
    finding names run, so a failure in some reads as one in all) nor the
    numbers in its message (read from freed memory, they change from run
    to run)."""
    s = signature(f)
    if s[0] != "runfail":
        return s
    return (s[0], s[2], re.sub(r"\d+", "N", str(s[3])))


class Reducer:
    def __init__(self, work, seed, block, finding, seconds, Check, signature):
        self.w, self.seed, self.block = work, seed, block
        self.sig = keep_key(signature, finding)
        self.Check, self.signature = Check, signature
        self.levels, self.ranks, self.emit_c = configs_of(finding)
        self.interp = any(str(f).startswith("I") for f in finding[1:3]) or finding[0] == "interp"
        self.deadline = time.time() + seconds
        self.tries = 0

    def keeps(self, text):
        if time.time() > self.deadline:
            return False
        self.tries += 1
        try:
            c = self.Check(self.w, text, self.seed, self.block, levels=self.levels, ranks=self.ranks,
                           interp=self.interp, emit_c=self.emit_c)
        except Exception:
            return False
        return any(keep_key(self.signature, f) == self.sig for f in c.findings)


def blocks(lines):
    """Deletable units: (start, end) line ranges; a repeat header with its
    body and brace is one."""
    out = []
    stack = []
    for i, l in enumerate(lines):
        s = l.strip()
        if not s or s.startswith("#"):
            continue
        if s.endswith("{"):
            stack.append(i)
            continue
        if s == "}":
            if stack:
                out.append((stack.pop(), i + 1))
            continue
        out.append((i, i + 1))
    return out


def delete_pass(r, text):
    lines = text.split("\n")
    changed = True
    n = max(1, len(blocks(lines)) // 2)
    while n >= 1:
        bl = blocks(lines)
        i = 0
        progress = False
        while i < len(bl):
            chunk = bl[i:i + n]
            dead = set()
            for a, b in chunk:
                dead |= set(range(a, b))
            cand = [l for k, l in enumerate(lines) if k not in dead]
            if r.keeps("\n".join(cand)):
                lines = cand
                bl = blocks(lines)
                progress = True
                continue
            i += n
        if not progress:
            n //= 2
        elif n > len(bl):
            n = max(1, len(bl) // 2)
    return "\n".join(lines), changed


def unit_pass(r, text):
    """Whole units of a group (the lines naming uN_...) out, halves first."""
    lines = text.split("\n")
    uids = []
    for l in lines:
        for u in re.findall(r"\b[A-Za-z]+(u\d+)(?:_\d+|\d+\b)", l):
            if u not in uids:
                uids.append(u)

    def without(drop):
        pat = re.compile(r"\b[A-Za-z]+(%s)(?:_\d+|\d+\b)" % "|".join(drop))
        out = []
        depth_skip = 0
        for l in lines:
            s = l.strip()
            if depth_skip:
                depth_skip += s.endswith("{") - (s == "}")
                continue
            if pat.search(l) or (s.startswith("def ") and pat.search(l)):
                if s.endswith("{"):
                    depth_skip = 1
                continue
            out.append(l)
        return out

    n = max(1, len(uids) // 2)
    while n >= 1 and len(uids) > 1:
        i, progress = 0, False
        while i < len(uids) and len(uids) > 1:
            drop = uids[i:i + n]
            if len(drop) == len(uids):
                break
            cand = without(drop)
            if r.keeps("\n".join(cand)):
                lines = cand
                uids = [u for u in uids if u not in drop]
                progress = True
                continue
            i += n
        if not progress:
            n //= 2
    return "\n".join(lines)


def unwrap_pass(r, text):
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip().startswith("repeat") and lines[i].strip().endswith("{"):
            depth, j = 0, i
            for j in range(i, len(lines)):
                s = lines[j].strip()
                if s.endswith("{"):
                    depth += 1
                elif s == "}":
                    depth -= 1
                    if depth == 0:
                        break
            cand = lines[:i] + lines[i + 1:j] + lines[j + 1:]
            if r.keeps("\n".join(cand)):
                lines = cand
                continue
            # a count of 1
            one = re.sub(r"repeat\s+(\w+\s+in\s+)?\d+", lambda m: "repeat %s1" % (m.group(1) or ""), lines[i], 1)
            if one != lines[i] and r.keeps("\n".join(lines[:i] + [one] + lines[i + 1:])):
                lines[i] = one
        i += 1
    return "\n".join(lines)


# ---- expressions ----

class Node:
    def __init__(self, a, b, kids):
        self.a, self.b, self.kids = a, b, kids      # span [a, b) in the token list


def parse_expr(toks):
    """Spans of sub-expressions of the token list (a precedence parser that
    records, for each node, its operands)."""
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def eat():
        pos[0] += 1
        return toks[pos[0] - 1]

    def primary():
        a = pos[0]
        t = peek()
        if t is None:
            raise ValueError
        if t == "(":
            eat()
            e = comparison()
            if eat() != ")":
                raise ValueError
            return Node(a, pos[0], [e])
        if t == "-":
            eat()
            e = power()
            return Node(a, pos[0], [e])
        eat()
        if peek() == "[":
            depth = 0
            while True:
                x = eat()
                depth += x == "["
                depth -= x == "]"
                if depth == 0:
                    break
            if peek() == "(":
                eat()
                e = comparison()
                eat()
                return Node(a, pos[0], [e])
            return Node(a, pos[0], [])
        if peek() == "(":
            eat()
            args = []
            if peek() != ")":
                args.append(comparison())
                while peek() == ",":
                    eat()
                    args.append(comparison())
            eat()
            return Node(a, pos[0], args)
        return Node(a, pos[0], [])

    def power():
        a = pos[0]
        e = primary()
        if peek() == "**":
            eat()
            f = power()
            return Node(a, pos[0], [e])
        return e

    def binop(sub, ops):
        def f():
            a = pos[0]
            e = sub()
            while peek() in ops:
                eat()
                g = sub()
                e = Node(a, pos[0], [e, g])
            return e
        return f

    term = binop(power, ("*", "/"))
    arith = binop(term, ("+", "-"))
    comparison = binop(arith, ("<", "<=", ">", ">=", "==", "!="))
    e = comparison()
    if pos[0] != len(toks):
        raise ValueError
    return e


def nodes(n):
    yield n
    for k in n.kids:
        yield from nodes(k)


def simplify_pass(r, text):
    lines = text.split("\n")
    for i in range(len(lines)):
        line = lines[i]
        m = re.match(r"^(\s*[^#=]*?(?:-=|\+=|\*=|/=|=))\s*(.*?);\s*$", line)
        if not m or line.strip().startswith(("size", "input", "param", "const", "output", "#", "repeat")):
            continue
        if re.match(r"\s*\w+\s*=\s*grad\(", line):
            continue
        head, rhs = m.group(1), m.group(2)
        if re.match(r"^\w+\(\w+(,\s*\w+)*\)$", rhs):      # a call of a def
            continue
        done = False
        while not done and time.time() < r.deadline:
            toks = TOKEN.findall(rhs)
            try:
                root = parse_expr(toks)
            except (ValueError, IndexError):
                break
            done = True
            for n in nodes(root):
                cands = [" ".join(toks[k.a:k.b]) for k in n.kids]
                if n.b - n.a == 1 and re.match(r"^\d", toks[n.a]) and toks[n.a] not in ("1", "0"):
                    cands.append("1")
                for c in cands:
                    new = " ".join(toks[:n.a]) + " " + c + " " + " ".join(toks[n.b:])
                    new = new.strip()
                    if new == rhs:
                        continue
                    cand = lines[:i] + ["%s %s;" % (head, new)] + lines[i + 1:]
                    if r.keeps("\n".join(cand)):
                        lines = cand
                        rhs = new
                        done = False
                        break
                if not done:
                    break
    return "\n".join(lines)


def sizes_pass(r, text):
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*size\s+\w+\s*=\s*)(\d+)\s*;\s*$", line)
        if not m:
            continue
        v = int(m.group(2))
        for smaller in sorted({1, 2, 3, v // 2}):
            if smaller >= v or smaller < 1:
                continue
            cand = lines[:i] + ["%s%d;" % (m.group(1), smaller)] + lines[i + 1:]
            if r.keeps("\n".join(cand)):
                lines = cand
                break
    return "\n".join(lines)


def tidy(text):
    """Drop #@ lines about names the program no longer declares."""
    code = "\n".join(l for l in text.split("\n") if not l.strip().startswith("#"))
    out = []
    for l in text.split("\n"):
        s = l.strip()
        if s.startswith("#@"):
            w = s[2:].split()
            if w and w[0] in ("tol", "scale") and len(w) > 1 and not re.search(r"\b%s\b" % re.escape(w[1]), code):
                continue
            if w and w[0] in ("rankdep", "nointerp"):
                keep = [x for x in w[1:] if re.search(r"\b%s\b" % re.escape(x), code)]
                if not keep:
                    continue
                l = "#@ %s %s" % (w[0], " ".join(keep))
            elif w and w[0] not in ("seed", "block", "tol", "scale", "error", "xfail", "known", "cflags") and \
                    not re.search(r"\b%s\b" % re.escape(w[0]), code):
                continue
        out.append(l)
    return "\n".join(out)


def reduce(work, text, seed, block, finding, seconds, Check, signature):
    r = Reducer(work, seed, block, finding, seconds, Check, signature)
    if not r.keeps(text):
        return text     # flaky, or needs the whole group: keep it as it is
    text = unit_pass(r, text)
    while time.time() < r.deadline:
        before = text
        text, _ = delete_pass(r, text)
        text = unwrap_pass(r, text)
        text = simplify_pass(r, text)
        text = sizes_pass(r, text)
        if text == before:
            break
    return tidy(text) + ("\n" if not text.endswith("\n") else "")
