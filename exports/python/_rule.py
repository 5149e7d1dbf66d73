"""The dispatch rule of an evo export and the expression language of its table, in plain Python.

Nothing here needs PyTorch, a GPU or the CUDA driver: the table (table.json beside this file) is
data, and this module reads it. The C++ export evaluates the same table with the same rule
(evo_attention.cc); evo's tests run both over one list of calls and compare what they print.

The rule, for a call (B, H, H_kv, S_q, S_kv, D, causal, dtypes) on a GPU of compute capability sm:
  1. kernels that run on sm: an arch-specific cubin (sm_90a) on that arch only, another one on
     its major version from its minor up (sm_80 on sm_80, sm_86, sm_89);
  2. whose compile-time key matches the call: D, causal, the dtypes of q, k and v;
  3. whose constraints hold for the call's run-time sizes (evaluated with the kernel's derived
     values): a kernel is valid for any lengths its manifest allows, because lengths are kernel
     arguments and grids are computed per call;
  4. among those entries, the tuned shape itself when there is one (B, H, H_kv, S_q, S_kv all
     equal), otherwise the nearest: the least sum over S_q, S_kv, B*H and H/H_kv of
     |L(call) - L(tuned)|, where L(x) = floor(log2(x * x)) counts half-octaves exactly in
     integers; ties go to the entry that comes first in the table (entries are sorted by key,
     then by tuned shape, smallest first).
"""

import json
import os

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1

RUNTIME_PARAMS = ("B", "H", "H_kv", "S_q", "S_kv")


class ExpressionError(ValueError):
    """An expression of the table that does not parse or evaluate."""


class DispatchError(ValueError):
    """A call that no kernel of the table serves, with the reason."""


# ---------------------------------------------------------------------------------------------
# Expressions: evo's manifest language (kernel_templates/expression.h), int64 with C semantics.

_SYMBOLS = ("||", "&&", "==", "!=", "<=", ">=", "?", ":", "<", ">", "+", "-", "*", "/", "%",
            "!", "(", ")", ",")
_BINARY = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5,
           "*": 6, "/": 6, "%": 6}
_FUNCTIONS = {"min": (2, None), "max": (2, None), "ceil_div": (2, 2), "is_pow2": (1, 1),
              "log2": (1, 1)}


def _tokenize(text):
    tokens = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos == len(text):
            tokens.append(("end", "", pos + 1))
            return tokens
        start = pos
        c = text[pos]
        if c.isascii() and c.isdigit():
            while pos < len(text) and (text[pos].isascii() and (text[pos].isalnum() or
                                                                text[pos] == "_")):
                pos += 1
            word = text[start:pos]
            if not word.isdigit():
                raise ExpressionError(f"expression '{text}': malformed number '{word}' at "
                                      f"column {start + 1}")
            value = int(word)
            if value > INT64_MAX:
                raise ExpressionError(f"expression '{text}': integer literal '{word}' is out of "
                                      f"range at column {start + 1}")
            tokens.append(("number", value, start + 1))
        elif c.isascii() and (c.isalpha() or c == "_"):
            while pos < len(text) and (text[pos].isascii() and (text[pos].isalnum() or
                                                                text[pos] == "_")):
                pos += 1
            tokens.append(("name", text[start:pos], start + 1))
        else:
            for symbol in _SYMBOLS:
                if text.startswith(symbol, pos):
                    tokens.append(("symbol", symbol, start + 1))
                    pos += len(symbol)
                    break
            else:
                raise ExpressionError(f"expression '{text}': unexpected character '{c}' at "
                                      f"column {start + 1}")


class _Parser:
    def __init__(self, text):
        self.text = text
        self.tokens = _tokenize(text)
        self.next = 0

    def fail(self, what):
        raise ExpressionError(f"expression '{self.text}': {what} at column "
                              f"{self.tokens[self.next][2]}")

    def peek(self):
        return self.tokens[self.next]

    def is_symbol(self, symbol):
        kind, text, _ = self.peek()
        return kind == "symbol" and text == symbol

    def expect(self, symbol):
        if not self.is_symbol(symbol):
            self.fail(f"expected '{symbol}'")
        self.next += 1

    def parse(self):
        if self.peek()[0] == "end":
            self.fail("empty expression")
        node = self.conditional()
        if self.peek()[0] != "end":
            self.fail("unexpected token after the end of the expression")
        return node

    def conditional(self):
        condition = self.binary(1)
        if not self.is_symbol("?"):
            return condition
        self.next += 1
        if_true = self.conditional()
        self.expect(":")
        if_false = self.conditional()
        return ("cond", condition, if_true, if_false)

    def binary(self, precedence):
        if precedence > 6:
            return self.unary()
        lhs = self.binary(precedence + 1)
        while True:
            kind, text, _ = self.peek()
            if kind != "symbol" or _BINARY.get(text) != precedence:
                return lhs
            self.next += 1
            rhs = self.binary(precedence + 1)
            lhs = ("bin", text, lhs, rhs)

    def unary(self):
        if self.is_symbol("!") or self.is_symbol("-"):
            op = self.peek()[1]
            self.next += 1
            return ("not" if op == "!" else "neg", self.unary())
        return self.primary()

    def primary(self):
        kind, text, _ = self.peek()
        if kind == "number":
            self.next += 1
            return ("lit", text)
        if kind == "name":
            self.next += 1
            if not self.is_symbol("("):
                return ("name", text)
            if text not in _FUNCTIONS:
                self.next -= 1
                self.fail(f"unknown function '{text}'")
            self.next += 1
            args = []
            if self.is_symbol(")"):
                self.next += 1
            else:
                while True:
                    args.append(self.conditional())
                    if self.is_symbol(")"):
                        self.next += 1
                        break
                    self.expect(",")
            low, high = _FUNCTIONS[text]
            if len(args) < low or (high is not None and len(args) > high):
                self.fail(f"{text} takes {low if low == high else f'at least {low}'} "
                          f"argument{'s' if low != 1 else ''}, got {len(args)}")
            return ("call", text, args)
        if self.is_symbol("("):
            self.next += 1
            inner = self.conditional()
            self.expect(")")
            return inner
        self.fail("expected a number, a name or '('")


_PARSED = {}


def _parse(text):
    node = _PARSED.get(text)
    if node is None:
        node = _Parser(text).parse()
        _PARSED[text] = node
    return node


def _checked(value, text, what):
    if value < INT64_MIN or value > INT64_MAX:
        raise ExpressionError(f"integer overflow in {what} in '{text}'")
    return value


def _div(a, b, text):
    if b == 0:
        raise ExpressionError(f"division by zero in '{text}'")
    quotient = abs(a) // abs(b)
    return _checked(-quotient if (a < 0) != (b < 0) else quotient, text, f"{a} / {b}")


def _mod(a, b, text):
    if b == 0:
        raise ExpressionError(f"modulo by zero in '{text}'")
    if b == -1:
        return 0
    return a - b * _div(a, b, text)


def _evaluate_node(node, env, text):
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "name":
        if node[1] not in env:
            raise ExpressionError(f"unknown name '{node[1]}' in '{text}'")
        return env[node[1]]
    if kind == "neg":
        value = _evaluate_node(node[1], env, text)
        return _checked(-value, text, f"-({value})")
    if kind == "not":
        return 1 if _evaluate_node(node[1], env, text) == 0 else 0
    if kind == "cond":
        chosen = node[2] if _evaluate_node(node[1], env, text) != 0 else node[3]
        return _evaluate_node(chosen, env, text)
    if kind == "bin":
        op = node[1]
        lhs = _evaluate_node(node[2], env, text)
        if op == "&&":
            return 1 if lhs != 0 and _evaluate_node(node[3], env, text) != 0 else 0
        if op == "||":
            return 1 if lhs != 0 or _evaluate_node(node[3], env, text) != 0 else 0
        rhs = _evaluate_node(node[3], env, text)
        if op == "==":
            return int(lhs == rhs)
        if op == "!=":
            return int(lhs != rhs)
        if op == "<":
            return int(lhs < rhs)
        if op == "<=":
            return int(lhs <= rhs)
        if op == ">":
            return int(lhs > rhs)
        if op == ">=":
            return int(lhs >= rhs)
        if op == "+":
            return _checked(lhs + rhs, text, f"{lhs} + {rhs}")
        if op == "-":
            return _checked(lhs - rhs, text, f"{lhs} - {rhs}")
        if op == "*":
            return _checked(lhs * rhs, text, f"{lhs} * {rhs}")
        if op == "/":
            return _div(lhs, rhs, text)
        return _mod(lhs, rhs, text)
    # A function call.
    name, args = node[1], node[2]
    if name in ("min", "max"):
        values = [_evaluate_node(arg, env, text) for arg in args]
        return min(values) if name == "min" else max(values)
    if name == "ceil_div":
        numerator = _evaluate_node(args[0], env, text)
        denominator = _evaluate_node(args[1], env, text)
        if denominator <= 0:
            raise ExpressionError(f"ceil_div divisor must be positive, got {denominator} in "
                                  f"'{text}'")
        return _div(numerator, denominator, text) + (
            1 if _mod(numerator, denominator, text) > 0 else 0)
    value = _evaluate_node(args[0], env, text)
    if name == "is_pow2":
        return int(value > 0 and value & (value - 1) == 0)
    if value <= 0:
        raise ExpressionError(f"log2 argument must be positive, got {value} in '{text}'")
    return value.bit_length() - 1


def evaluate(expr, env):
    """The value of one of the table's expressions: an integer as is, a string parsed once and
    evaluated over env (name -> int) with int64 arithmetic as evo's C++ evaluates it."""
    if isinstance(expr, bool) or not isinstance(expr, (int, str)):
        raise ExpressionError(f"not an expression: {expr!r}")
    if isinstance(expr, int):
        return expr
    return _evaluate_node(_parse(expr), env, expr)


# ---------------------------------------------------------------------------------------------
# The table.

def load_table(folder=None):
    """The table shipped beside this module (or in folder)."""
    folder = folder or os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(folder, "table.json"), encoding="utf-8") as f:
        table = json.load(f)
    if table.get("format") != "evo-dispatch-1":
        raise ValueError(f"{folder}/table.json is not an evo dispatch table of format "
                         "evo-dispatch-1")
    for kernel in table["kernels"]:
        for launch in kernel["launches"]:
            check_cluster(launch)
    return table


def launch_cluster(launch):
    """A launch's thread-block cluster extents; tables from before clusters have none."""
    return list(launch.get("cluster", [1, 1, 1]))


def check_cluster(launch):
    """Refuses a cluster CUDA cannot launch: three extents >= 1, at most 8 CTAs."""
    cluster = launch.get("cluster", [1, 1, 1])
    # type(), not isinstance(): JSON's true is a bool, an int to Python; the C++ export refuses it.
    if (not isinstance(cluster, list) or len(cluster) != 3
            or not all(type(c) is int and c >= 1 for c in cluster)
            or cluster[0] * cluster[1] * cluster[2] > 8):
        raise ValueError(f"{launch['entry']}'s cluster {cluster} is not 1 to 8 CTAs of extents "
                         ">= 1")


def runs_on(kernel, sm):
    """Whether the kernel's cubin runs on a GPU of compute capability sm (e.g. 90)."""
    if kernel["arch_specific"]:
        return sm == kernel["sm"]
    return sm // 10 == kernel["sm"] // 10 and sm >= kernel["sm"]


def describe_key(call):
    return (f"D={call['D']}, {'causal' if call['causal'] else 'not causal'}, "
            f"q {call['q_dtype']}, k/v {call['kv_dtype']}")


def describe_shape(shape):
    return " ".join(f"{name}={shape[name]}" for name in RUNTIME_PARAMS)


def check_call(call):
    """Refuses a call whose sizes no kernel argument can carry."""
    for name in RUNTIME_PARAMS + ("D",):
        value = call[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise DispatchError(f"{name} must be an integer, not {value!r}")
        if value < 1 or value > INT32_MAX:
            raise DispatchError(f"{name}={value} is outside [1, 2^31 - 1]")
    if call["H"] % call["H_kv"] != 0:
        raise DispatchError(f"H={call['H']} query heads are not a multiple of H_kv="
                            f"{call['H_kv']} key/value heads")


def bindings(kernel, call):
    """The run-time parameters of the call and the kernel's derived values, in order."""
    env = {name: call[name] for name in RUNTIME_PARAMS}
    for name, expr in kernel["derived"]:
        env[name] = evaluate(expr, env)
    return env


def violation(kernel, call):
    """Why the kernel cannot serve the call (its first constraint that fails), or None."""
    try:
        env = bindings(kernel, call)
        for constraint in kernel["constraints"]:
            if evaluate(constraint["expr"], env) == 0:
                return f"{constraint['name']} ({constraint['expr']}): {constraint['doc']}"
    except ExpressionError as error:
        return str(error)
    return None


def _half_octaves(x):
    x = min(max(x, 1), INT32_MAX)
    return (x * x).bit_length() - 1


def features(shape):
    return (shape["S_q"], shape["S_kv"], shape["B"] * shape["H"], shape["H"] // shape["H_kv"])


def distance(call, shape):
    """Half-octaves between a call and a tuned shape over S_q, S_kv, B*H and H/H_kv."""
    return sum(abs(_half_octaves(a) - _half_octaves(b))
               for a, b in zip(features(call), features(shape)))


def pick(table, call, sm):
    """(index of the table entry that serves the call, whether it is the tuned shape itself).

    call: B, H, H_kv, S_q, S_kv, D (ints), causal (bool or 0/1), q_dtype and kv_dtype ("f16",
    "bf16", "fp8e4m3"). Raises DispatchError saying why when no kernel serves it."""
    check_call(call)
    kernels = table["kernels"]
    on_device = [i for i, entry in enumerate(table["entries"])
                 if runs_on(kernels[entry["kernel"]], sm)]
    if not on_device:
        archs = sorted({kernel["target"] for kernel in kernels})
        raise DispatchError(f"no kernel of this table runs on sm_{sm}: it holds kernels for "
                            f"{', '.join(archs)}")
    causal = 1 if call["causal"] else 0
    matching = []
    for i in on_device:
        key = kernels[table["entries"][i]["kernel"]]["key"]
        if (key["D"] == call["D"] and key["causal"] == causal and
                key["q_dtype"] == call["q_dtype"] and key["kv_dtype"] == call["kv_dtype"]):
            matching.append(i)
    if not matching:
        keys = []
        for i in on_device:
            key = describe_key(kernels[table["entries"][i]["kernel"]]["key"])
            if key not in keys:
                keys.append(key)
        raise DispatchError(f"no tuned kernel for {describe_key(call)} on sm_{sm}: the table "
                            f"has {'; '.join(keys)}. Tune this case (evo tune) and export again")
    valid = []
    refusals = []
    for i in matching:
        entry = table["entries"][i]
        reason = violation(kernels[entry["kernel"]], call)
        if reason is None:
            valid.append(i)
        else:
            refusals.append(f"the kernel tuned at {describe_shape(entry['shape'])} needs "
                            f"{reason}")
    if not valid:
        raise DispatchError(f"no tuned kernel for {describe_key(call)} on sm_{sm} is valid for "
                            f"{describe_shape(call)}: " + "; ".join(refusals))
    for i in valid:
        shape = table["entries"][i]["shape"]
        if all(shape[name] == call[name] for name in RUNTIME_PARAMS):
            return i, True
    best = min(valid, key=lambda i: (distance(call, table["entries"][i]["shape"]), i))
    return best, False


# ---------------------------------------------------------------------------------------------
# A call's launches: grids, shared memory, scalars, tensor shapes and scratch, per call.

_DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "i64": 8, "fp8e4m3": 1, "fp8e5m2": 1}
_SWIZZLE_SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128}


def dtype_bytes(dtype):
    return _DTYPE_BYTES[dtype]


def tensor_shape(param, env):
    return [evaluate(dim, env) for dim in param["shape"]]


def launch_plan(kernel, call, device):
    """Everything a call launches, evaluated: device is {"NUM_SMS": n, "CTAS_PER_SM": {entry:
    occupancy}} (grids may use both, scratch shapes NUM_SMS). Returns {"scratch": [...],
    "steps": [...]} where a step is ("memset", name) or ("launch", launch, grid, scalars, tensor
    shapes, tensor-map boxes)."""
    env = bindings(kernel, call)
    # Scratch may be sized by the device, as a persistent grid is (a row per CTA).
    scratch_env = dict(env)
    scratch_env["NUM_SMS"] = device["NUM_SMS"]
    scratch = []
    for spec in kernel["scratch"]:
        shape = tensor_shape(spec, scratch_env)
        elements = 1
        for extent in shape:
            elements *= extent
        scratch.append({"name": spec["name"], "dtype": spec["dtype"], "shape": shape,
                        "bytes": elements * dtype_bytes(spec["dtype"]), "zero": spec["zero"]})
    launches = {launch["entry"]: launch for launch in kernel["launches"]}
    steps = []
    for step in kernel["call"]:
        if "memset" in step:
            steps.append({"memset": step["memset"]})
            continue
        launch = launches[step["launch"]]
        if "when" in launch and evaluate(launch["when"], env) == 0:
            continue
        grid_env = dict(env)
        grid_env["NUM_SMS"] = device["NUM_SMS"]
        grid_env["CTAS_PER_SM"] = device["CTAS_PER_SM"][launch["entry"]]
        grid = [evaluate(dim, grid_env) for dim in launch["grid"]]
        for i, extent in enumerate(grid):
            limit = INT32_MAX if i == 0 else 65535
            if extent < 1 or extent > limit:
                raise DispatchError(f"{launch['entry']}'s grid[{i}] is {extent} for "
                                    f"{describe_shape(call)}, outside [1, {limit}]")
            cluster = launch_cluster(launch)[i]
            if extent % cluster != 0:
                raise DispatchError(f"{launch['entry']}'s grid[{i}] is {extent} for "
                                    f"{describe_shape(call)}, not a multiple of its cluster's "
                                    f"{cluster}")
        args = []
        for param in launch["params"]:
            kind = param["kind"]
            if kind == "scalar":
                value = evaluate(param["value"], env)
                if param["dtype"] == "i32" and not -(1 << 31) <= value <= INT32_MAX:
                    raise DispatchError(f"{param['name']}={value} does not fit the i32 argument "
                                        f"of {launch['entry']}")
                args.append({"name": param["name"], "kind": kind, "dtype": param["dtype"],
                             "value": value})
            elif kind == "tensor_map":
                described = dict(param)
                described["box"] = [evaluate(b, env) for b in param["box"]]
                args.append(described)
            else:
                arg = {"name": param["name"], "kind": kind, "dtype": param["dtype"],
                       "shape": tensor_shape(param, scratch_env if kind == "scratch" else env)}
                if "role" in param:
                    arg["role"] = param["role"]
                args.append(arg)
        steps.append({"launch": launch["entry"], "grid": grid, "block": launch["block"],
                      "cluster": launch_cluster(launch),
                      "dynamic_smem_bytes": launch["dynamic_smem_bytes"], "args": args})
    return {"scratch": scratch, "steps": steps}


def encode_layout(map_arg, tensor_shape_outermost, dtype):
    """dims, strides and box of a tensor map over a contiguous tensor, checked against the rules
    of cuTensorMapEncodeTiled: raises DispatchError naming the rule a call would break."""
    element = dtype_bytes(dtype)
    dims = list(reversed(tensor_shape_outermost))
    strides = []
    stride = element
    for i, extent in enumerate(dims):
        if extent < 1 or extent > (1 << 32):
            raise DispatchError(f"tensor map {map_arg['name']}: dimension {i} is {extent}, "
                                "outside [1, 2^32]")
        if i > 0:
            if stride % 16 != 0:
                raise DispatchError(f"tensor map {map_arg['name']}: the stride of dimension {i}"
                                    f" is {stride} bytes, not a multiple of 16")
            strides.append(stride)
        stride *= extent
    box = map_arg["box"]
    if len(box) != len(dims):
        raise DispatchError(f"tensor map {map_arg['name']}: {len(box)} box extents for a "
                            f"tensor of rank {len(dims)}")
    for i, extent in enumerate(box):
        if extent < 1 or extent > 256:
            raise DispatchError(f"tensor map {map_arg['name']}: box[{i}] is {extent}, outside "
                                "[1, 256]")
    inner = box[0] * element
    if map_arg["interleave"] == "none":
        span = _SWIZZLE_SPAN[map_arg["swizzle"]]
        if inner % 16 != 0 or (span and inner > span):
            raise DispatchError(f"tensor map {map_arg['name']}: the box's inner extent is "
                                f"{inner} bytes, not a multiple of 16 within the "
                                f"{map_arg['swizzle']} swizzle's span")
    elif len(dims) < 3:
        raise DispatchError(f"tensor map {map_arg['name']}: an interleaved map needs at least "
                            "three dimensions")
    return dims, strides, box


def _list(values):
    return "[" + ",".join(str(v) for v in values) + "]"


def describe_call(table, call, sm, num_sms, ctas_per_sm):
    """Everything a call launches, as the C++ export's DescribeCall prints it: evo's tests run
    both over the same calls and compare the text."""
    try:
        index, exact = pick(table, call, sm)
        entry = table["entries"][index]
        kernel = table["kernels"][entry["kernel"]]
        device = {"NUM_SMS": num_sms,
                  "CTAS_PER_SM": {launch["entry"]: ctas_per_sm for launch in kernel["launches"]}}
        plan = launch_plan(kernel, call, device)
        lines = [f"entry {index} exact {int(exact)} kernel {entry['kernel']} tuned "
                 f"{describe_shape(entry['shape'])}"]
        for spec in plan["scratch"]:
            lines.append(f"scratch {spec['name']} {spec['dtype']} {_list(spec['shape'])} bytes "
                         f"{spec['bytes']} zero {spec['zero']}")
        for step in plan["steps"]:
            if "memset" in step:
                lines.append(f"memset {step['memset']}")
                continue
            cluster = step.get("cluster", [1, 1, 1])
            clustered = f" cluster {_list(cluster)}" if cluster != [1, 1, 1] else ""
            lines.append(f"launch {step['launch']} grid {_list(step['grid'])} block "
                         f"{_list(step['block'])}{clustered} smem {step['dynamic_smem_bytes']}")
            shapes = {arg["name"]: arg["shape"] for arg in step["args"] if "shape" in arg}
            for arg in step["args"]:
                if arg["kind"] == "scalar":
                    lines.append(f"  scalar {arg['name']} {arg['dtype']} {arg['value']}")
                elif arg["kind"] == "tensor_map":
                    dims, strides, box = encode_layout(arg, shapes[arg["tensor"]], arg["dtype"])
                    lines.append(f"  map {arg['name']} {arg['tensor']} dims {_list(dims)} strides "
                                 f"{_list(strides)} box {_list(box)} swizzle {arg['swizzle']}")
                else:
                    # What a launch binds the tensor to: a scratch buffer by name, otherwise
                    # the caller's tensor by role.
                    bound = arg["name"] if arg["kind"] == "scratch" else arg["role"]
                    lines.append(f"  tensor {arg['name']} {arg['kind']} {arg['dtype']} "
                                 f"{_list(arg['shape'])} bound {bound}")
    except (DispatchError, ExpressionError) as error:
        return f"error: {error}\n"
    return "\n".join(lines) + "\n"
