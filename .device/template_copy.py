"""What the device scripts' patched copies of sdpa_hopper share: the copy itself (fixed_template.py's,
some knobs fixed), patches at exact anchors of the template's source, edits of the manifest's
derived values, and the wgmma forms that the device library (evo/wgmma.cuh) does not wrap, which a
copy must carry in its own source because evo embeds the library it was built with."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The overlapped loop's softmax of tile j, the wait for P_{j-1} V, and the packing of P_j: where
# the copies that move that wait or P change the template.
SOFTMAX_WAIT_PACK = """          softmax(j, alpha);
          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(acc);
          evo::wgmma_fence_registers(p);
          release(smem.v_empty(stage_of(j - 1)), lane);
          if (!RESCALE_UNDER_QK) rescale(alpha);
          pack_probabilities();"""


class TemplateCopy:
    """OUT/sdpa_hopper written by fixed_template.py with KNOB=VALUE settings; `text` is its source
    until write()."""

    def __init__(self, out, settings):
        subprocess.run([sys.executable, os.path.join(HERE, "fixed_template.py"), out] + list(settings),
                       check=True)
        self.folder = os.path.join(out, "sdpa_hopper")
        self.path = os.path.join(self.folder, "sdpa_hopper.cu")
        self.text = open(self.path).read()

    @classmethod
    def from_argv(cls):
        """The copy a script's command line names: OUT KNOB=VALUE..."""
        return cls(sys.argv[1], sys.argv[2:])

    def patch(self, anchor, new, count=1):
        """Replaces `anchor`, which must occur exactly `count` times: a template that moved on
        fails here, not in a copy that silently lost its change."""
        found = self.text.count(anchor)
        assert found == count, (found, anchor)
        self.text = self.text.replace(anchor, new)

    def replace_span(self, first, last, new):
        """Replaces the source from `first` through `last`, each occurring exactly once."""
        for anchor in (first, last):
            assert self.text.count(anchor) == 1, (self.text.count(anchor), anchor)
        start = self.text.index(first)
        end = self.text.index(last) + len(last)
        assert start < end, (first, last)
        self.text = self.text[:start] + new + self.text[end:]

    def before_namespace(self, code):
        """Puts `code` right before the template's namespace (static_asserts, helpers)."""
        self.patch("namespace hopper {\n", code + "namespace hopper {\n")

    def derive(self, name, expr):
        """Sets the manifest's derived value `name` to expr(its current expression)."""
        path = os.path.join(self.folder, "manifest.json")
        manifest = json.load(open(path))
        (entry,) = [d for d in manifest["derived"] if d["name"] == name]
        entry["expr"] = expr(entry["expr"])
        json.dump(manifest, open(path, "w"), indent=2)

    def open_tolerance(self):
        """Opens the correctness tolerance so far that the gates time a copy that is wrong on
        purpose (a speed-of-light copy)."""
        path = os.path.join(self.folder, "manifest.json")
        manifest = json.load(open(path))
        manifest["correctness"]["atol"] = 1e6
        manifest["correctness"]["rtol"] = 1e6
        for override in manifest["correctness"].get("overrides", []):
            override["atol"], override["rtol"] = 1e6, 1e6
        json.dump(manifest, open(path, "w"), indent=2)

    def write(self):
        open(self.path, "w").write(self.text)


def wgmma_forms(namespace, sizes, a_from_registers, transpose_b, always_accumulate=False):
    """C++ for `namespace::Mma<N, Bf>::run(d, a, b, accumulate)`: m64nNk16 with fp32 accumulators,
    fp16 (Bf false) or bf16 operands, B by descriptor (read transposed when transpose_b), A by
    descriptor or, a_from_registers, as the 4 registers of the warp's m16n8k16 A fragment; d is
    overwritten where accumulate is 0. always_accumulate: run(d, a, b), d += A B always (the
    flag a constant: ptxas schedules the two forms differently)."""
    code = f"namespace {namespace} {{\ntemplate <int N, bool Bf> struct Mma;\n"
    for n in sizes:
        regs = n // 2
        accumulators = ", ".join(f"%{i}" for i in range(regs))
        outputs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
        if a_from_registers:
            a_type, a_text = "const unsigned (&a)[4]", f"{{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}"
            inputs, b_text, flag = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])', f"%{regs + 4}", regs + 5
            immediates = f"1, 1, {int(transpose_b)}"  # scale A, scale B, transpose B
        else:
            a_type, a_text = "unsigned long long a", f"%{regs}"
            inputs, b_text, flag = '"l"(a)', f"%{regs + 1}", regs + 2
            immediates = f"1, 1, 0, {int(transpose_b)}"  # scale A, scale B, transpose A, B
        accumulate_param, accumulate_input = ("", "1") if always_accumulate else (", int accumulate", "accumulate")
        for bf, ty in ((False, "f16"), (True, "bf16")):
            code += f"""template <> struct Mma<{n}, {'true' if bf else 'false'}> {{
  static __device__ __forceinline__ void run(float (&d)[{regs}], {a_type}, unsigned long long b{accumulate_param}) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{flag}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{accumulators}}}, {a_text}, {b_text}, p, {immediates};\\n}}\\n"
                 : {outputs}
                 : {inputs}, "l"(b), "r"({accumulate_input}));
  }}
}};
"""
    return code + f"}}  // namespace {namespace}\n"
