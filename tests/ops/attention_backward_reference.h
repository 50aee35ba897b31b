// A float64 reference of attention forward and backward on dense (rows, H, D) arrays: the
// sequences of a batch one after the other along the rows (as varlen packs them). The
// backward recomputes S, P, dP and dS in float64 from q, k, v and do (its own o and D, not
// the device's), and also returns, per gradient element, a bound on the magnitudes summed
// into it (used to scale the tolerance of the device results).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace kaio::test::attn_bwd {

struct Problem {
  uint32_t hq = 1, hkv = 1, d = 64;
  double scale = 0.125;
  int wl = -1, wr = -1;  // causal: wr = 0
  double softcap = 0;
  std::vector<double> alibi;        // [hq] or empty
  std::vector<uint32_t> sq, sk;     // per batch entry
  uint32_t q_start(uint32_t b) const { uint32_t s = 0; for (uint32_t x = 0; x < b; ++x) s += sq[x]; return s; }
  uint32_t k_start(uint32_t b) const { uint32_t s = 0; for (uint32_t x = 0; x < b; ++x) s += sk[x]; return s; }
  uint32_t rows_q() const { return q_start(uint32_t(sq.size())); }
  uint32_t rows_k() const { return k_start(uint32_t(sk.size())); }
  // Element e of head h of row r of a (rows, H, D) array.
  uint64_t qi(uint32_t r, uint32_t h, uint32_t e) const { return (uint64_t(r) * hq + h) * d + e; }
  uint64_t ki(uint32_t r, uint32_t h, uint32_t e) const { return (uint64_t(r) * hkv + h) * d + e; }
  // Does query i of entry b see key j (bottom-right aligned window)?
  bool visible(uint32_t b, uint32_t i, uint32_t j) const {
    const long center = long(i) + long(sk[b]) - long(sq[b]);
    return !(wl >= 0 && long(j) < center - wl) && !(wr >= 0 && long(j) > center + wr);
  }
  // The modified score and the derivative of the modifiers at the raw score.
  void score(double raw, uint32_t b, uint32_t i, uint32_t j, uint32_t h, double& s, double& deriv) const {
    s = raw * scale;
    deriv = 1;
    if (softcap > 0) {
      const double t = std::tanh(s / softcap);
      s = softcap * t;
      deriv = 1 - t * t;
    }
    if (!alibi.empty()) s -= alibi[h] * std::fabs(double(long(i) + long(sk[b]) - long(sq[b]) - long(j)));
  }
};

struct Forward {
  std::vector<double> o, oabs, lse;  // o and sum_j p |v| per (row, h, e); lse per (row, h)
};

// The probabilities of row i of entry b, head h, over the keys it sees (p[j] = 0 elsewhere).
inline std::vector<double> probs(const Problem& p, const std::vector<double>& q, const std::vector<double>& k, uint32_t b,
                                 uint32_t i, uint32_t h, double* lse_out, std::vector<double>* deriv_out) {
  const uint32_t kvh = h / (p.hq / p.hkv), qr = p.q_start(b) + i, k0 = p.k_start(b);
  std::vector<double> s(p.sk[b], -std::numeric_limits<double>::infinity()), deriv(p.sk[b], 0.0);
  double m = -std::numeric_limits<double>::infinity();
  for (uint32_t j = 0; j < p.sk[b]; ++j) {
    if (!p.visible(b, i, j)) continue;
    double dot = 0;
    for (uint32_t e = 0; e < p.d; ++e) dot += q[p.qi(qr, h, e)] * k[p.ki(k0 + j, kvh, e)];
    p.score(dot, b, i, j, h, s[j], deriv[j]);
    m = std::max(m, s[j]);
  }
  std::vector<double> w(p.sk[b], 0.0);
  if (m == -std::numeric_limits<double>::infinity()) {
    if (lse_out) *lse_out = m;
    if (deriv_out) *deriv_out = deriv;
    return w;
  }
  double sum = 0;
  for (uint32_t j = 0; j < p.sk[b]; ++j) sum += (w[j] = std::exp(s[j] - m));
  for (double& x : w) x /= sum;
  if (lse_out) *lse_out = m + std::log(sum);
  if (deriv_out) *deriv_out = deriv;
  return w;
}

inline Forward forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
  Forward f;
  f.o.assign(uint64_t(p.rows_q()) * p.hq * p.d, 0.0);
  f.oabs = f.o;
  f.lse.assign(uint64_t(p.rows_q()) * p.hq, 0.0);
  for (uint32_t b = 0; b < p.sq.size(); ++b)
    for (uint32_t i = 0; i < p.sq[b]; ++i)
      for (uint32_t h = 0; h < p.hq; ++h) {
        const uint32_t qr = p.q_start(b) + i, kvh = h / (p.hq / p.hkv);
        const std::vector<double> w = probs(p, q, k, b, i, h, &f.lse[uint64_t(qr) * p.hq + h], nullptr);
        for (uint32_t j = 0; j < p.sk[b]; ++j)
          for (uint32_t e = 0; e < p.d && w[j] != 0; ++e) {
            const double x = v[p.ki(p.k_start(b) + j, kvh, e)];
            f.o[p.qi(qr, h, e)] += w[j] * x;
            f.oabs[p.qi(qr, h, e)] += w[j] * std::fabs(x);
          }
      }
  return f;
}

// sum(do * o): the loss whose gradients the backward computes.
inline double loss(const Problem& p, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                   const std::vector<double>& dout) {
  const Forward f = forward(p, q, k, v);
  double l = 0;
  for (size_t n = 0; n < f.o.size(); ++n) l += f.o[n] * dout[n];
  return l;
}

struct Grads {
  std::vector<double> dq, dk, dv;           // like q, k, v
  std::vector<double> dq_abs, dk_abs, dv_abs;  // the sums of the magnitudes of their terms
};

inline Grads backward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                      const std::vector<double>& dout) {
  const Forward f = forward(p, q, k, v);
  Grads g;
  g.dq.assign(q.size(), 0.0), g.dq_abs = g.dq;
  g.dk.assign(k.size(), 0.0), g.dk_abs = g.dk;
  g.dv.assign(v.size(), 0.0), g.dv_abs = g.dv;
  for (uint32_t b = 0; b < p.sq.size(); ++b)
    for (uint32_t i = 0; i < p.sq[b]; ++i)
      for (uint32_t h = 0; h < p.hq; ++h) {
        const uint32_t qr = p.q_start(b) + i, kvh = h / (p.hq / p.hkv), k0 = p.k_start(b);
        std::vector<double> deriv;
        const std::vector<double> w = probs(p, q, k, b, i, h, nullptr, &deriv);
        double D = 0, Dabs = 0;  // rowsum(do * o), and the bound on its error from o's
        for (uint32_t e = 0; e < p.d; ++e) {
          D += dout[p.qi(qr, h, e)] * f.o[p.qi(qr, h, e)];
          Dabs += std::fabs(dout[p.qi(qr, h, e)]) * f.oabs[p.qi(qr, h, e)];
        }
        for (uint32_t j = 0; j < p.sk[b]; ++j) {
          if (w[j] == 0) continue;
          double dp = 0;
          for (uint32_t e = 0; e < p.d; ++e) dp += dout[p.qi(qr, h, e)] * v[p.ki(k0 + j, kvh, e)];
          const double ds = w[j] * (dp - D) * deriv[j] * p.scale;
          const double ds_abs = w[j] * (std::fabs(dp) + std::fabs(D) + Dabs) * p.scale;
          for (uint32_t e = 0; e < p.d; ++e) {
            const uint64_t qe = p.qi(qr, h, e), ke = p.ki(k0 + j, kvh, e);
            g.dq[qe] += ds * k[ke];
            g.dq_abs[qe] += ds_abs * std::fabs(k[ke]);
            g.dk[ke] += ds * q[qe];
            g.dk_abs[ke] += ds_abs * std::fabs(q[qe]);
            g.dv[ke] += w[j] * dout[qe];
            g.dv_abs[ke] += w[j] * std::fabs(dout[qe]);
          }
        }
      }
  return g;
}

}  // namespace kaio::test::attn_bwd
