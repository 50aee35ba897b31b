#include "kaio_cache_tune.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "kaio/cache/store.h"
#include "kaio/tuner/once.h"
#include "kaio/tuner/tuner.h"

namespace kaio::tools {

namespace {

using json = nlohmann::json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Row {
  std::string key;
  std::optional<tuner::Record> rec;
  std::string why;  // when the record does not decode
};

// The timed candidates, fastest first.
std::vector<const tuner::CandidateResult*> ranked(const tuner::Record& r) {
  std::vector<const tuner::CandidateResult*> v;
  for (const auto& c : r.candidates)
    if (c.status == "ok") v.push_back(&c);
  std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->median_ms < b->median_ms; });
  return v;
}

}  // namespace

int tune_ls(const std::filesystem::path& dir, bool as_json) {
  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::optional<tuner::Claim>>> claims;  // tunings in progress
  std::error_code ec;
  if (std::filesystem::exists(dir / "data.mdb", ec)) {
    auto store = cache::Store::open(dir, {.move_aside_damaged = false});
    store->for_each("tuning", [&](std::string_view k, std::string_view v) {
      if (tuner::is_claim_key(k)) {
        claims.emplace_back(std::string(k.substr(tuner::kClaimPrefix.size())), tuner::decode_claim(v));
        return;
      }
      Row r{std::string(k), std::nullopt, ""};
      r.rec = tuner::decode(v, &r.why);
      rows.push_back(std::move(r));
    });
  } else if (!as_json) {
    std::cout << "no cache at " << dir.string() << "\n";
    return 0;
  }
  const uint64_t now = uint64_t(std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
  const uint64_t now_ms = tuner::now_ms();
  if (as_json) {
    json out = json::array();
    for (const Row& r : rows) {
      if (!r.rec) {
        out.push_back({{"key", r.key}, {"damaged", r.why}});
        continue;
      }
      json cands = json::array();
      for (const auto& c : r.rec->candidates)
        cands.push_back({{"name", c.name}, {"status", c.status}, {"median_ms", c.median_ms}, {"runs", c.runs}});
      const auto margin = r.rec->runner_up_margin();
      out.push_back({{"key", r.key},
                     {"op", r.rec->op},
                     {"winner", r.rec->winner},
                     {"runner_up_margin", margin ? json(*margin) : json(nullptr)},
                     {"tune_seconds", r.rec->tune_seconds},
                     {"table_hash", r.rec->table_hash},
                     {"created_unix", r.rec->created_unix},
                     {"noisy", r.rec->noisy},
                     {"drift", r.rec->drift},
                     {"candidates", cands}});
    }
    for (const auto& [key, c] : claims) {
      if (!c) {
        out.push_back({{"key", key}, {"claim", {{"damaged", true}}}});
        continue;
      }
      const std::string stale = tuner::claim_stale(*c, now_ms);
      out.push_back({{"key", key},
                     {"claim",
                      {{"pid", c->pid},
                       {"host", c->host},
                       {"start_ms", c->start_ms},
                       {"deadline_ms", c->deadline_ms},
                       {"stale", stale.empty() ? json(nullptr) : json(stale)}}}});
    }
    // Keys are ours (ASCII), but a foreign entry must not make the listing throw.
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> table{
      {"KEY", "WINNER", "TIME", "RUNNER-UP", "MARGIN", "TIMED", "FAILED", "TUNING", "AGE", "NOTE"}};
  for (const Row& r : rows) {
    if (!r.rec) {
      table.push_back({r.key, "(damaged: " + r.why + ")", "", "", "", "", "", "", "", ""});
      continue;
    }
    const auto rk = ranked(*r.rec);
    const size_t failed = r.rec->candidates.size() - rk.size();
    const auto margin = r.rec->runner_up_margin();
    const uint64_t age = now > r.rec->created_unix ? now - r.rec->created_unix : 0;
    table.push_back({r.key, r.rec->winner.empty() ? "-" : r.rec->winner,
                     rk.empty() ? "-" : fmt("%.4f ms", rk[0]->median_ms), rk.size() > 1 ? rk[1]->name : "-",
                     margin ? fmt("+%.1f%%", *margin * 100) : "-", std::to_string(rk.size()), std::to_string(failed),
                     fmt("%.2f s", r.rec->tune_seconds),
                     age < 3600 ? std::to_string(age / 60) + "m" : age < 172800 ? std::to_string(age / 3600) + "h"
                                                                              : std::to_string(age / 86400) + "d",
                     r.rec->noisy ? "noisy" : ""});
  }
  std::vector<size_t> w(table[0].size(), 0);
  for (const auto& row : table)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (const auto& row : table) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += row[i] + (i + 1 < row.size() ? std::string(w[i] - row[i].size() + 2, ' ') : "");
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
  std::cout << rows.size() << " tuning entries\n";
  if (!claims.empty()) {
    std::cout << "\ntunings in progress (claims):\n";
    for (const auto& [key, c] : claims) {
      if (!c) {
        std::cout << "  " << key << "  (damaged claim)\n";
        continue;
      }
      const std::string stale = tuner::claim_stale(*c, now_ms);
      const double since = double(now_ms - std::min(now_ms, c->start_ms)) / 1000.0;
      const double left = (double(c->deadline_ms) - double(now_ms)) / 1000.0;
      std::cout << "  " << key << "  pid " << c->pid << " on " << c->host << ", started " << fmt("%.1f", since)
                << " s ago, deadline " << (left >= 0 ? "in " + fmt("%.0f", left) + " s" : fmt("%.0f", -left) + " s ago")
                << (stale.empty() ? "" : " (stale: " + stale + ")") << "\n";
    }
  }
  return 0;
}

}  // namespace kaio::tools
