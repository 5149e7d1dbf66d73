extern "C" __global__ void k(const unsigned* in, unsigned* out, const float* fin, float* fout) {
  int i = threadIdx.x;
  unsigned x = in[i], y;
  asm("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  out[i] = y;
  unsigned z;
  asm("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(z) : "r"(x));
  out[i+1000] = z;
  float f = fin[i], g;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(g) : "f"(f));
  fout[i] = g;
}
