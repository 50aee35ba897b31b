// The CPU interpreter on the parallel language: shared memory, barriers, warp ops, atomics,
// vector access, the new math, and the shared-memory diagnostics.
#include <catch2/catch.hpp>

#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"
#include "interp_support.h"

using namespace kaio;
using namespace kaio::test::interp;
using Catch::Matchers::Contains;
using kaio::test::usage_error_of;

// ---------------- the parallel language: shared memory, barriers, warp ops, atomics ----------------


TEST_CASE("interp: shuffles (every mode, width, type) and votes against a host model", "[interp][lang]") {
  ir::KernelBuilder b("warp_model");
  auto in = b.param<const int32_t*>("in");
  auto in64 = b.param<const double*>("in64");
  auto in16 = b.param<const kaio::half*>("in16");
  auto out = b.param<int32_t*>("out");  // 10 per thread
  auto o64 = b.param<double*>("o64");
  auto o16 = b.param<kaio::half*>("o16");
  Value t = b.global_id_x(), lane = b.lane_id();
  Value xv = in[t];
  Value o = t * 10u;
  out[o] = ir::shfl_up(xv, 1u);
  out[o + 1u] = ir::shfl_up(xv, 3u, 8);
  out[o + 2u] = ir::shfl_down(xv, 2u);
  out[o + 3u] = ir::shfl_down(xv, 5u, 16);
  out[o + 4u] = ir::shfl_xor(xv, 13u);
  out[o + 5u] = ir::shfl_xor(xv, 3u, 4);
  out[o + 6u] = ir::shfl_idx(xv, (lane * 5u + 3u) & 31u);
  out[o + 7u] = ir::shfl_idx(xv, lane + 2u, 8);  // lane arg beyond the segment: modulo width
  out[o + 8u] = ir::cast<int32_t>(ir::ballot(xv > 0));
  Value one = b.constant(1), zero = b.constant(0);
  out[o + 9u] = ir::select(ir::vote_all(xv > -90), one, zero) + ir::select(ir::vote_any(xv > 95), one, zero) * 2;
  Value yv = in64[t];
  o64[t] = ir::shfl_xor(yv, 1u);
  Value hv = in16[t];
  o16[t] = ir::shfl_down(hv, 1u);
  ir::Kernel k = b.build();
  const uint32_t n = 128;
  std::vector<int32_t> x(n), got(n * 10);
  std::vector<double> y(n), g64(n);
  std::vector<kaio::half> h(n), g16(n);
  std::uniform_int_distribution<int> d(-100, 100);
  for (uint32_t i = 0; i < n; ++i) {
    x[i] = d(rng());
    y[i] = double(x[i]) * 1e10 + 0.25;
    h[i] = kaio::half(float(x[i]) / 8);
  }
  poison(got);
  poison(g64);
  ir::interpret(k, {.grid = {2}, .block = {64}}, x, y, h, got, g64, g16);
  for (uint32_t t = 0; t < n; ++t) {
    uint32_t w = t & ~31u, l = t & 31u;
    auto at = [&](uint32_t lane) { return x[w + lane]; };
    auto seg = [&](uint32_t width) { return l & ~(width - 1); };
    int32_t e[10] = {l >= 1 ? at(l - 1) : at(l),
                     (l % 8) >= 3 ? at(l - 3) : at(l),
                     l + 2 < 32 ? at(l + 2) : at(l),
                     (l % 16) + 5 < 16 ? at(l + 5) : at(l),
                     at(l ^ 13),
                     at(l ^ 3),
                     at((l * 5 + 3) & 31),
                     at(seg(8) + ((l + 2) & 7)),
                     0,
                     0};
    uint32_t ballot = 0;
    bool all = true, any = false;
    for (uint32_t k2 = 0; k2 < 32; ++k2) {
      ballot |= (at(k2) > 0 ? 1u : 0u) << k2;
      all = all && at(k2) > -90;
      any = any || at(k2) > 95;
    }
    e[8] = int32_t(ballot);
    e[9] = (all ? 1 : 0) + (any ? 2 : 0);
    for (int k2 = 0; k2 < 10; ++k2) {
      INFO("thread " << t << " output " << k2);
      CHECK(got[t * 10 + k2] == e[k2]);
    }
    CHECK(g64[t] == y[w + (l ^ 1)]);
    CHECK(g16[t].bits == h[l + 1 < 32 ? t + 1 : t].bits);
  }
  // votes count only the active lanes
  ir::KernelBuilder b2("vote_divergent");
  auto out2 = b2.param<uint32_t*>("out");
  Value l2 = b2.lane_id();
  b2.if_(l2 < 10u, [&] { out2[l2] = ir::ballot(l2 > 3u); });
  ir::Kernel k2 = b2.build();
  std::vector<uint32_t> o2(32, 7);
  ir::interpret(k2, {.grid = {1}, .block = {32}}, o2);
  for (uint32_t i = 0; i < 10; ++i) CHECK(o2[i] == 0x3f0u);
}

TEST_CASE("interp: block reductions and scans from the builder, barriers between warps", "[interp][lang]") {
  for (int op = 0; op < 3; ++op) {
    ir::KernelBuilder b("block_red_" + std::to_string(op));
    auto in = b.param<const float*>("in");
    auto iin = b.param<const int32_t*>("iin");
    auto out = b.param<float*>("out");
    auto iout = b.param<int32_t*>("iout");
    Value t = b.global_id_x(), blk = b.block_idx_x();
    Value x = in[t];
    Value xi = iin[t];
    Value r = op == 0 ? b.block_reduce_sum(x) : op == 1 ? b.block_reduce_max(x) : b.block_reduce_min(x);
    Value ri = op == 0 ? b.block_reduce_sum(xi) : op == 1 ? b.block_reduce_max(xi) : b.block_reduce_min(xi);
    b.if_(b.thread_idx_x() == 0u, [&] {
      out[blk] = r;
      iout[blk] = ri;
    });
    ir::Kernel k = b.build();
    for (uint32_t threads : {32u, 96u, 256u, 1024u}) {
      INFO("op " << op << " threads " << threads);
      const uint32_t blocks = 3, n = blocks * threads;
      std::vector<float> x(n);
      std::vector<int32_t> xi(n);
      auto ds = random_doubles(n, -1, 1);
      for (uint32_t i = 0; i < n; ++i) {
        x[i] = float(ds[i]);
        xi[i] = int32_t(ds[i] * 1000);
      }
      std::vector<float> out(blocks);
      std::vector<int32_t> iout(blocks);
      poison(out);
      poison(iout);
      ir::interpret(k, {.grid = {blocks}, .block = {threads}}, x, xi, out, iout);
      for (uint32_t bi = 0; bi < blocks; ++bi) {
        double ref = op == 0 ? 0 : op == 1 ? -INFINITY : INFINITY, mag = 0;
        int64_t iref = op == 0 ? 0 : op == 1 ? INT32_MIN : INT32_MAX;
        for (uint32_t i = bi * threads; i < (bi + 1) * threads; ++i) {
          ref = op == 0 ? ref + x[i] : op == 1 ? std::max(ref, double(x[i])) : std::min(ref, double(x[i]));
          iref = op == 0 ? iref + xi[i] : op == 1 ? std::max<int64_t>(iref, xi[i]) : std::min<int64_t>(iref, xi[i]);
          mag += std::fabs(x[i]);
        }
        CHECK(std::fabs(out[bi] - ref) <= (op == 0 ? 20 * 1.2e-7 * mag : 0));
        CHECK(iout[bi] == iref);
      }
    }
  }
  // scans (blocks of whole warps: see the report on block_scan with a partial last warp)
  ir::KernelBuilder b("block_scans");
  auto in = b.param<const int32_t*>("in");
  auto incl = b.param<int32_t*>("incl");
  auto excl = b.param<int32_t*>("excl");
  Value t = b.global_id_x();
  Value x = in[t];
  Value i = b.block_scan_inclusive(x);
  Value e = b.block_scan_exclusive(x);
  incl[t] = i;
  excl[t] = e;
  ir::Kernel k = b.build();
  for (uint32_t threads : {32u, 128u, 1024u}) {
    const uint32_t blocks = 3, n = blocks * threads;
    std::vector<int32_t> xs(n), gi(n), ge(n);
    for (uint32_t j = 0; j < n; ++j) xs[j] = int32_t(rng()() % 101) - 50;
    poison(gi);
    poison(ge);
    auto st = ir::interpret(k, {.grid = {blocks}, .block = {threads}}, xs, gi, ge);
    CHECK(st.thread_instructions > 0);
    size_t bad = 0;
    for (uint32_t bi = 0; bi < blocks; ++bi) {
      int32_t run = 0;
      for (uint32_t j = bi * threads; j < (bi + 1) * threads; ++j) {
        bad += ge[j] != run;
        run += xs[j];
        bad += gi[j] != run;
      }
    }
    INFO("threads " << threads);
    CHECK(bad == 0);
  }
}

TEST_CASE("interp: shared-memory transpose with barriers, dynamic shared memory", "[interp][lang]") {
  ir::Kernel k = test::transpose_kernel("transpose_i", true);
  const uint32_t R = 77, C = 45;
  std::vector<float> x(R * C), o(R * C);
  for (uint32_t j = 0; j < R * C; ++j) x[j] = float(j) * 0.5f;
  poison(o);
  ir::interpret(k, {.grid = {(C + 31) / 32, (R + 31) / 32}, .block = {32, 8}}, x, o, R, C);
  size_t bad = 0;
  for (uint32_t r = 0; r < R; ++r)
    for (uint32_t cc = 0; cc < C; ++cc) bad += o[cc * R + r] != x[r * C + cc];
  CHECK(bad == 0);

  // dynamic shared memory: reverse through it, sized by the launch
  ir::KernelBuilder b2("reverse_dyn");
  auto in2 = b2.param<const int32_t*>("in");
  auto out2 = b2.param<int32_t*>("out");
  auto cnt = b2.param<uint32_t>("count");
  auto dyn = b2.dynamic_shared<int32_t>();
  Value tid = b2.thread_idx_x(), nt = b2.block_dim_x();
  b2.for_(tid, cnt, nt, [&](Value kk) { dyn[kk] = in2[kk]; });
  b2.barrier();
  b2.for_(tid, cnt, nt, [&](Value kk) {
    Value rev = cnt - 1u - kk;
    out2[kk] = dyn[rev];
  });
  ir::Kernel k2 = b2.build();
  const uint32_t count = 20000;
  std::vector<int32_t> xi(count), oi(count);
  for (uint32_t j = 0; j < count; ++j) xi[j] = int32_t(j * 7);
  ir::interpret(k2, {.grid = {2}, .block = {96}, .shared_bytes = count * 4}, xi, oi, count);
  for (uint32_t j = 0; j < count; ++j) REQUIRE(oi[j] == xi[count - 1 - j]);
  // too small a dynamic size is an out-of-bounds shared access
  auto e = usage_error_of([&] {
    ir::interpret(k2, {.grid = {1}, .block = {32}, .shared_bytes = 64}, xi, oi, count);
  });
  CHECK_THAT(e.what(), Contains("dynamic shared memory (64 bytes)"));
  CHECK_THAT(e.what(), Contains("index 16"));
}

TEST_CASE("interp: histogram with shared and global atomics; every atomic op", "[interp][lang]") {
  ir::Kernel k = test::histogram_kernel("histo_i");
  const uint32_t N = 30011;
  std::vector<uint32_t> x(N), ref(256, 0), h(256, 0);
  for (auto& v : x) v = uint32_t(rng()());
  for (uint32_t v : x) ref[v & 255]++;
  ir::interp::HostArg args[] = {ir::interp::host_arg(x), ir::interp::host_arg(h), ir::interp::host_arg(N)};
  ir::interp::interpret_packed(k, {.grid = {16}, .block = {128}}, args, 3, {.threads = 4});
  CHECK(h == ref);

  // add returns the old value (unique tickets), min/max/exch/cas, f32 and f64 add
  ir::KernelBuilder b2("atomics_i");
  auto ctr = b2.param<uint32_t*>("ctr");       // [0] ticket counter
  auto tickets = b2.param<uint32_t*>("tickets");
  auto mm = b2.param<int32_t*>("mm");          // [0] min, [1] max, [2] exch target, [3] cas
  auto fs = b2.param<float*>("fs");
  auto ds = b2.param<double*>("ds");
  auto smem = b2.shared<int32_t>(4);
  Value g = b2.global_id_x(), t2 = b2.thread_idx_x();
  Value gi = ir::cast<int32_t>(g);
  tickets[g] = ir::atomic_add(ctr, 0u, 1u);
  (void)ir::atomic_min(mm, 0u, gi - 1000);
  (void)ir::atomic_max(mm, 1u, gi * 3);
  (void)ir::atomic_exch(mm, 2u, gi);
  (void)ir::atomic_cas(mm, 3u, 0, gi + 1);  // exactly one thread wins
  (void)ir::atomic_add(fs, 0u, 0.5f);
  (void)ir::atomic_add(ds, 0u, 0.25);
  b2.if_(t2 == 0u, [&] { smem[0u] = 100; });
  b2.barrier();
  Value old = ir::atomic_max(smem, 0u, ir::cast<int32_t>(t2));
  (void)old;
  b2.barrier();
  b2.if_(t2 == 0u, [&] {
    Value v = smem[0u];
    (void)ir::atomic_add(mm, 4u, v);
  });
  ir::Kernel k2 = b2.build();
  const uint32_t T = 1024;
  std::vector<uint32_t> c(1, 0), tk(T);
  std::vector<int32_t> m = {INT32_MAX, INT32_MIN, -1, 0, 0};
  std::vector<float> f(1, 0.0f);
  std::vector<double> dd(1, 0.0);
  ir::interp::HostArg a2[] = {ir::interp::host_arg(c), ir::interp::host_arg(tk), ir::interp::host_arg(m),
                              ir::interp::host_arg(f), ir::interp::host_arg(dd)};
  ir::interp::interpret_packed(k2, {.grid = {8}, .block = {128}}, a2, 5, {.threads = 4});
  CHECK(c[0] == T);
  std::vector<uint32_t> sorted = tk;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < T; ++i) REQUIRE(sorted[i] == i);
  CHECK(m[0] == -1000);
  CHECK(m[1] == int32_t(T - 1) * 3);
  CHECK((m[2] >= 0 && m[2] < int32_t(T)));
  CHECK((m[3] >= 1 && m[3] <= int32_t(T)));
  CHECK(m[4] == 8 * 127);  // each block: max(100, 0..127) = 127
  CHECK(f[0] == 0.5f * T);
  CHECK(dd[0] == 0.25 * T);
}

TEST_CASE("interp: load_vec / store_vec, and a misaligned vector access", "[interp][lang]") {
  ir::KernelBuilder b("vec_i");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto hin = b.param<const kaio::half*>("hin");
  auto hout = b.param<kaio::half*>("hout");
  auto off = b.param<uint32_t>("off");
  auto n4 = b.param<uint32_t>("n4");
  auto sm = b.shared<float>(512);
  Value i = b.global_id_x(), t = b.thread_idx_x();
  b.if_(i < n4, [&] {
    Value base = i * 4u;
    auto v = ir::load_vec(in, base + off, 4);
    ir::store_vec(sm, t * 4u, {v[3], v[2], v[1], v[0]});
    auto w = ir::load_vec(sm, t * 4u, 4);
    ir::store_vec(out, base, w);
    auto hv = ir::load_vec(hin, i * 2u, 2);
    ir::store_vec(hout, i * 2u, {hv[1], hv[0]});
  });
  ir::Kernel k = b.build();
  const uint32_t N4 = 300;
  std::vector<float> x(N4 * 4 + 8), o(N4 * 4);
  std::vector<kaio::half> hx(N4 * 2), ho(N4 * 2);
  for (size_t j = 0; j < x.size(); ++j) x[j] = float(j) + 0.5f;
  for (size_t j = 0; j < hx.size(); ++j) hx[j] = kaio::half(float(j));
  poison(o);
  ir::interpret(k, {.grid = {(N4 + 127) / 128}, .block = {128}}, x, o, hx, ho, 4u, N4);
  for (uint32_t j = 0; j < N4 * 4; ++j) REQUIRE(o[j] == x[(j & ~3u) + 3 - (j & 3) + 4]);
  for (uint32_t j = 0; j < N4 * 2; ++j) REQUIRE(ho[j].bits == hx[j ^ 1].bits);
  auto e = usage_error_of([&] { ir::interpret(k, {.grid = {1}, .block = {32}}, x, o, hx, ho, 2u, 8u); });
  CHECK(e.kernel() == "vec_i");
  CHECK(e.op() == "load_vec");
  CHECK_THAT(e.what(), Contains("misaligned"));
  CHECK_THAT(e.what(), Contains("block (0, 0, 0), thread (0, 0, 0)"));
  CHECK_THAT(e.what(), Contains("[2]"));
  CHECK_THAT(e.what(), Contains("16 bytes"));
}

TEST_CASE("interp: the new math, casts with saturation, launch bounds", "[interp][lang]") {
  const size_t n = 3000;
  auto xs = random_doubles(n, -12, 12);
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = float(xs[i]);
    y[i] = float(xs[(i * 7 + 3) % n]) / 3.0f;
  }
  x[0] = 2.5f; x[1] = -2.5f; x[2] = 0.5f; x[3] = -0.0f; x[4] = 3.5f;  // ties
  y[5] = 3.0f; x[5] = -2.0f;   // pow(-2, 3) = -8
  y[6] = 2.0f; x[6] = -2.0f;   // pow(-2, 2) = 4
  y[7] = 0.0f; x[7] = NAN;     // pow(NaN, 0) = 1
  y[8] = 0.5f; x[8] = -4.0f;   // NaN
  x[9] = INFINITY; x[10] = -INFINITY; x[11] = NAN;
  struct Case {
    const char* name;
    std::function<Value(Value, Value)> f;
    std::function<double(float, float)> ref;
    double ulps;  // 0: exact
  };
  auto powref = [](float a, float bb) -> double {
    if (bb == 0) return 1;
    if (a < 0) {
      if (std::trunc(bb) != bb) return NAN;
      double r = std::pow(double(-a), double(bb));
      return std::fmod(bb, 2.0f) != 0 ? -r : r;
    }
    return std::pow(double(a), double(bb));
  };
  std::vector<Case> cases = {
      {"rcp", [](Value a, Value) { return ir::rcp(a); }, [](float a, float) { return 1.0 / a; }, 0.5},
      {"exp2", [](Value a, Value) { return ir::exp2(a); }, [](float a, float) { return std::exp2(double(a)); }, 1},
      {"log2", [](Value a, Value) { return ir::log2(ir::abs(a)); }, [](float a, float) { return std::log2(std::fabs(double(a))); }, 1},
      {"erf", [](Value a, Value) { return ir::erf(a * 0.25f); }, [](float a, float) { return std::erf(double(a * 0.25f)); }, 1},
      {"floor", [](Value a, Value) { return ir::floor(a); }, [](float a, float) { return std::floor(a); }, 0},
      {"ceil", [](Value a, Value) { return ir::ceil(a); }, [](float a, float) { return std::ceil(a); }, 0},
      {"round", [](Value a, Value) { return ir::round(a); }, [](float a, float) { return std::round(a); }, 0},
      {"trunc", [](Value a, Value) { return ir::trunc(a); }, [](float a, float) { return std::trunc(a); }, 0},
      {"rint", [](Value a, Value) { return ir::rint(a); }, [](float a, float) { return std::nearbyint(a); }, 0},
      {"pow", [](Value a, Value bb) { return ir::pow(a, bb); }, powref, 1},
      {"copysign", [](Value a, Value bb) { return ir::copysign(a, bb); }, [](float a, float bb) { return std::copysign(a, bb); }, 0},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    ir::Kernel k = binary_kernel(std::string("nm_") + c.name, Scalar::F32, Scalar::F32, c.f);
    std::vector<float> out(n);
    poison(out);
    ir::interpret(k, shape_for(n), x, y, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      double r = c.ref(x[i], y[i]);
      double g = out[i];
      bool ok;
      if (std::isnan(r)) ok = std::isnan(g);
      else if (std::isinf(r) || c.ulps == 0) ok = g == r && std::signbit(g) == std::signbit(r);
      else ok = std::fabs(g - r) <= c.ulps * std::ldexp(1.0, std::ilogb(std::max(std::fabs(r), 1e-37)) - 23);
      if (!ok && bad++ < 3) UNSCOPED_INFO(c.name << "(" << x[i] << ", " << y[i] << ") = " << g << ", want " << r);
    }
    CHECK(bad == 0);
  }
  CHECK(std::signbit(-0.0f));
  // isnan / isinf, f64 rounding, f16 copysign
  ir::KernelBuilder b("classes");
  auto xin = b.param<const float*>("x");
  auto dxin = b.param<const double*>("dx");
  auto o = b.param<uint32_t*>("o");
  auto od = b.param<double*>("od");
  auto nn = b.param<uint32_t>("n");
  Value i = b.global_id_x();
  b.if_(i < nn, [&] {
    Value v = xin[i];
    Value dv = dxin[i];
    Value one = b.constant(1u), zero = b.constant(0u);
    o[i] = ir::select(ir::isnan(v), one, zero) + ir::select(ir::isinf(v), one, zero) * 2u +
           ir::select(ir::isnan(dv), one, zero) * 4u;
    od[i * 3u] = ir::round(dv);
    od[i * 3u + 1u] = ir::rint(dv);
    od[i * 3u + 2u] = ir::rcp(dv);
  });
  ir::Kernel kc = b.build();
  std::vector<double> dx(n);
  for (size_t j = 0; j < n; ++j) dx[j] = j % 5 == 0 ? NAN : xs[j] * 1e3 + (j % 2 ? 0.5 : 0.0);
  std::vector<uint32_t> oc(n);
  std::vector<double> odv(3 * n);
  ir::interpret(kc, shape_for(n), x, dx, oc, odv, uint32_t(n));
  for (size_t j = 0; j < n; ++j) {
    uint32_t e = (std::isnan(x[j]) ? 1 : 0) + (std::isinf(x[j]) ? 2 : 0) + (std::isnan(dx[j]) ? 4 : 0);
    REQUIRE(oc[j] == e);
    if (std::isnan(dx[j])) continue;
    REQUIRE(odv[3 * j] == std::round(dx[j]));
    REQUIRE(odv[3 * j + 1] == std::nearbyint(dx[j]));
    REQUIRE(odv[3 * j + 2] == 1.0 / dx[j]);
  }
  // saturating casts: integers clamp to the range, float targets to [0, 1] with NaN -> 0
  ir::KernelBuilder bs("sat");
  auto si = bs.param<const int32_t*>("si");
  auto sf = bs.param<const float*>("sf");
  auto ou8 = bs.param<uint8_t*>("u8");
  auto os16 = bs.param<int16_t*>("s16");
  auto of = bs.param<float*>("f");
  auto oh = bs.param<kaio::half*>("h");
  auto sn = bs.param<uint32_t>("n");
  Value j = bs.global_id_x();
  bs.if_(j < sn, [&] {
    Value a = si[j];
    Value fv = sf[j];
    ou8[j] = ir::cast_sat<uint8_t>(a);
    os16[j] = ir::cast_sat<int16_t>(a);
    of[j] = ir::cast_sat<float>(fv);
    oh[j] = ir::cast_sat<kaio::half>(fv);
  });
  ir::Kernel ks = bs.build();
  std::vector<int32_t> iv = {-5, 0, 77, 255, 256, 40000, -40000, INT32_MIN, INT32_MAX};
  std::vector<float> fv = {-1.0f, 0.25f, 1.0f, 1.5f, NAN, -0.0f, 0.999f, INFINITY, 1e-3f};
  std::vector<uint8_t> u8(9);
  std::vector<int16_t> s16(9);
  std::vector<float> fo(9);
  std::vector<kaio::half> ho(9);
  ir::interpret(ks, shape_for(9), iv, fv, u8, s16, fo, ho, 9u);
  for (size_t q = 0; q < 9; ++q) {
    CHECK(u8[q] == std::clamp<int64_t>(iv[q], 0, 255));
    CHECK(s16[q] == std::clamp<int64_t>(iv[q], INT16_MIN, INT16_MAX));
    float ref = std::isnan(fv[q]) ? 0.0f : std::clamp(fv[q], 0.0f, 1.0f);
    CHECK(fo[q] == ref);
    CHECK(float(ho[q]) == float(kaio::half(ref)));
  }
  // launch bounds: more threads than max_threads is refused, as by the GPU
  ir::KernelBuilder bl("bounded");
  auto lo = bl.param<uint32_t*>("o");
  bl.launch_bounds(64);
  bl.fast_math();
  bl.comment("comments and fences do nothing here");
  bl.fence();
  lo[bl.global_id_x()] = bl.lane_id();
  ir::Kernel kl = bl.build();
  std::vector<uint32_t> lv(128);
  ir::interpret(kl, {.grid = {2}, .block = {64}}, lv);
  for (uint32_t q = 0; q < 128; ++q) CHECK(lv[q] == q % 32);
  auto e = usage_error_of([&] { ir::interpret(kl, {.grid = {1}, .block = {128}}, lv); });
  CHECK(e.kernel() == "bounded");
  CHECK_THAT(e.what(), Contains("launch bounds"));
}

TEST_CASE("interp: shared-memory diagnostics (out of bounds, uninitialized, races)", "[interp][lang]") {
  // out of bounds: thread 20 of block 1 stores tile[40] of a 40-element array
  {
    ir::KernelBuilder b("smem_oob");
    auto o = b.param<float*>("o");
    auto tile = b.shared<float>(40);
    Value t = b.thread_idx_x();
    tile[t * 2u] = 1.0f;
    b.barrier();
    Value v = tile[0u];
    o[t] = v;
    ir::Kernel k = b.build();
    std::vector<float> out(64);
    ir::interpret(k, {.grid = {2}, .block = {20}}, out);  // fine
    auto e = usage_error_of([&] { ir::interpret(k, {.grid = {2}, .block = {32}}, out); });
    CHECK(e.kernel() == "smem_oob");
    CHECK(e.op() == "store");
    CHECK_THAT(e.what(), Contains("block (0, 0, 0), thread (20, 0, 0)"));
    CHECK_THAT(e.what(), Contains("out-of-bounds shared"));
    CHECK_THAT(e.what(), Contains("index 40"));
    CHECK_THAT(e.what(), Contains("40 x f32"));
    CHECK_THAT(e.what(), Contains("shared address 0xa0"));
  }
  // uninitialized: thread 5 reads an element nobody stored
  {
    ir::KernelBuilder b("smem_uninit");
    auto o = b.param<int32_t*>("o");
    auto s = b.shared<int32_t>(64);
    Value t = b.thread_idx_x();
    b.if_(t != 5u, [&] { s[t] = 1; });
    b.barrier();
    Value v = s[t];
    o[t] = v;
    ir::Kernel k = b.build();
    std::vector<int32_t> out(64);
    auto e = usage_error_of([&] { ir::interpret(k, {.grid = {3, 2}, .block = {64}}, out); });
    CHECK(e.op() == "load");
    CHECK_THAT(e.what(), Contains("uninitialized shared memory"));
    CHECK_THAT(e.what(), Contains("thread (5, 0, 0)"));
    CHECK_THAT(e.what(), Contains("[5]"));
    CHECK_THAT(e.what(), Contains("0x14"));
  }
  // a read-after-write race between warps (no barrier): thread 32 reads what thread 0 wrote
  {
    ir::KernelBuilder b("smem_race");
    auto o = b.param<int32_t*>("o");
    auto s = b.shared<int32_t>(64);
    Value t = b.thread_idx_x();
    b.if_(t < 32u, [&] { s[t] = ir::cast<int32_t>(t); });
    Value v = s[t & 31u];
    o[t] = v;
    ir::Kernel k = b.build();
    std::vector<int32_t> out(64);
    auto e = usage_error_of([&] { ir::interpret(k, {.grid = {1}, .block = {64}}, out); });
    CHECK(e.kernel() == "smem_race");
    CHECK(e.op() == "load");
    CHECK_THAT(e.what(), Contains("race on shared memory"));
    CHECK_THAT(e.what(), Contains("block (0, 0, 0), thread (32, 0, 0)"));  // warp 1 reads s[0] of thread 0
    CHECK_THAT(e.what(), Contains("a store by thread (0, 0, 0)"));
    CHECK_THAT(e.what(), Contains("[0]"));
    CHECK_THAT(e.what(), Contains("shared byte 0x0"));
    // with a barrier between, the same exchange is fine
    ir::KernelBuilder b2("smem_norace");
    auto o2 = b2.param<int32_t*>("o");
    auto s2 = b2.shared<int32_t>(64);
    Value t2 = b2.thread_idx_x();
    s2[t2] = ir::cast<int32_t>(t2);
    b2.barrier();
    Value v2 = s2[(t2 + 32u) & 63u];
    o2[t2] = v2;
    ir::Kernel k2 = b2.build();
    ir::interpret(k2, {.grid = {1}, .block = {64}}, out);
    for (int q = 0; q < 64; ++q) CHECK(out[q] == (q + 32) % 64);
  }
  // write-after-read and write-write races; atomics are not races
  {
    ir::KernelBuilder b("smem_war");
    auto o = b.param<int32_t*>("o");
    auto s = b.shared<int32_t>(8);
    Value t = b.thread_idx_x();
    b.if_(t < 8u, [&] { s[t] = 0; });
    b.barrier();
    (void)ir::atomic_add(s, 0u, 1);  // every thread: fine
    b.barrier();
    Value v = s[0u];
    o[t] = v;
    b.if_(t == 40u, [&] { s[0u] = 5; });  // thread 40 overwrites what all just read
    ir::Kernel k = b.build();
    std::vector<int32_t> out(64);
    auto e = usage_error_of([&] { ir::interpret(k, {.grid = {1}, .block = {64}}, out); });
    CHECK(e.op() == "store");
    CHECK_THAT(e.what(), Contains("thread (40, 0, 0)"));
    CHECK_THAT(e.what(), Contains("a load by several other threads"));
    ir::KernelBuilder b2("smem_ww");
    auto s2 = b2.shared<int32_t>(8);
    auto o2 = b2.param<int32_t*>("o");
    Value t2 = b2.thread_idx_x();
    s2[t2 & 1u] = 1;
    b2.barrier();
    Value v2 = s2[0u];
    o2[t2] = v2;
    ir::Kernel kw = b2.build();
    auto e2 = usage_error_of([&] { ir::interpret(kw, {.grid = {1}, .block = {4}}, out); });
    CHECK(e2.op() == "store");
    CHECK_THAT(e2.what(), Contains("thread (2, 0, 0)"));
    CHECK_THAT(e2.what(), Contains("a store by thread (0, 0, 0)"));
  }
}

