// Fixture of the front-end arithmetic check (tests/architecture/check_front_end_arithmetic.cmake): line 5 computes a
// layer quantity (KV bytes per token) and must be found; the other lines must pass.
// const double kv = 2.0 * double(a.kv_heads) * a.head_dim;  (a comment: passes)
void sample(const Arch& a, int tp) {
  const double kv = 2.0 * double(a.kv_heads) * double(a.head_dim);
  if (a.heads % tp != 0) return;  // a divisibility rule: passes
  const auto label = fmt::format("{} heads", a.heads);  // shown, not computed: passes
  int v[2] = {0, 1};  // brackets and ';' do not shift the line numbers
}
