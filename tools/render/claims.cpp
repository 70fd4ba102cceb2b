#include "tools/render/claims.h"

#include <time.h>

#include <cstdio>

#include "pools/sticky.h"
#include "shm/format.h"

namespace shmipam::tools {

using engine::ClaimView;
using nlohmann::json;

namespace {

std::string utc(uint64_t unix_s) {
    const time_t t = time_t(unix_s);
    tm parts{};
    gmtime_r(&t, &parts);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return buf;
}

std::string addresses_text(const ClaimView& c) {
    std::string out;
    for (const auto& a : c.addresses) out += (out.empty() ? "" : ",") + a.to_string();
    return out.empty() ? "-" : out;
}

const char* use_name(ClaimView::Use u) {
    switch (u) {
        case ClaimView::Use::kInUse:
            return "in-use";
        case ClaimView::Use::kIdle:
            return "idle";
        case ClaimView::Use::kUnknownSandbox:
            return "in-use-unknown-sandbox";
        case ClaimView::Use::kExpiring:
            return "expiring";
    }
    return "?";
}

std::string use_text(const ClaimView& c) {
    switch (c.use) {
        case ClaimView::Use::kInUse:
            return "in use by " + c.container_id.substr(0, 12);
        case ClaimView::Use::kIdle:
            return c.idle_since_unix_s == 0 ? "idle (sandbox gone)"
                                            : "idle since " + utc(c.idle_since_unix_s);
        case ClaimView::Use::kUnknownSandbox:
            return "in use (sandbox unknown since a rebuild)";
        case ClaimView::Use::kExpiring:
            return "being released";
    }
    return "?";
}

std::string expires_text(const ClaimView& c, uint64_t now) {
    if (c.use != ClaimView::Use::kIdle || c.expires_unix_s == 0) return "-";
    if (now >= c.expires_unix_s) return "due (freed by the next invocation)";
    return utc(c.expires_unix_s);
}

json claim_json(const ClaimRow& r, uint64_t now) {
    const ClaimView& c = r.claim;
    const ClaimName n = parse_claim_key(c.key);
    json a = json::array();
    for (const auto& x : c.addresses) a.push_back(x.to_string());
    json j{{"network", r.network},
           {"claim", c.key},
           {"kind", n.kind},
           {"name", n.name},
           {"ifname", n.ifname},
           {"pod", c.pod},
           {"addresses", a},
           {"use", use_name(c.use)},
           {"policy", policy_text(c.keep_idle, n.kind)}};
    if (c.use == ClaimView::Use::kInUse) j["containerID"] = c.container_id;
    if (c.idle_since_unix_s != 0) j["idleSince"] = utc(c.idle_since_unix_s);
    if (c.use == ClaimView::Use::kIdle && c.expires_unix_s != 0) {
        j["expiresAt"] = utc(c.expires_unix_s);
        j["due"] = now >= c.expires_unix_s;
    }
    return j;
}

std::string row_text(const ClaimRow& r, uint64_t now) {
    const ClaimName n = parse_claim_key(r.claim.key);
    char line[512];
    std::snprintf(line, sizeof line, "%-28s %-6s %-30s %-18s %-42s %-10s %s\n", n.name.c_str(),
                  n.ifname.c_str(), addresses_text(r.claim).c_str(), r.network.c_str(),
                  use_text(r.claim).c_str(), policy_text(r.claim.keep_idle, n.kind).c_str(),
                  expires_text(r.claim, now).c_str());
    return line;
}

}  // namespace

ClaimName parse_claim_key(const std::string& key) {
    ClaimName n;
    const size_t colon = key.find(':');
    const size_t last = key.rfind('/');
    if (colon == std::string::npos || last == std::string::npos || last < colon) {
        n.name = key;
        return n;
    }
    n.kind = key.substr(0, colon);
    n.name = key.substr(colon + 1, last - colon - 1);
    n.ifname = key.substr(last + 1);
    return n;
}

std::string policy_text(uint64_t keep_idle, const std::string& kind) {
    pools::ClaimPolicy p;
    if (keep_idle == format::kKeepIdleNone) {
        p.kind = pools::ClaimPolicy::Kind::kAtDelete;
    } else if (keep_idle == format::kKeepIdleWhileOwnerWants) {
        p.kind = pools::ClaimPolicy::Kind::kWhileOwnerWants;
    } else if (keep_idle != format::kKeepIdleForever) {
        p.kind = pools::ClaimPolicy::Kind::kAfterIdle;
        p.idle_seconds = int64_t(keep_idle - 1);
    }
    return pools::describe(
        p, kind == "vm" ? pools::StickyKind::kKubeVirt : pools::StickyKind::kStatefulSet);
}

json claims_json(const std::vector<ClaimRow>& rows, uint64_t now) {
    json list = json::array();
    for (const auto& r : rows) list.push_back(claim_json(r, now));
    return json{{"claims", list}};
}

std::string claims_text(const std::vector<ClaimRow>& rows, uint64_t now) {
    char head[512];
    std::snprintf(head, sizeof head, "%-28s %-6s %-30s %-18s %-42s %-10s %s\n", "CLAIM", "IF",
                  "ADDRESSES", "NETWORK", "USE", "POLICY", "EXPIRES");
    std::string out = head;
    for (const auto& r : rows) out += row_text(r, now);
    size_t in_use = 0;
    for (const auto& r : rows) in_use += r.claim.use != ClaimView::Use::kIdle;
    out += std::to_string(rows.size()) + " claims, " + std::to_string(in_use) + " in use, " +
           std::to_string(rows.size() - in_use) + " idle\n";
    return out;
}

json released_claims_json(const std::vector<ClaimRow>& released,
                          const std::vector<ClaimRow>& in_use, bool applied) {
    json r = json::array(), kept = json::array();
    for (const auto& c : released) r.push_back(claim_json(c, 0));
    for (const auto& c : in_use) kept.push_back(claim_json(c, 0));
    return json{{"applied", applied}, {"released", r}, {"inUse", kept}};
}

std::string released_claims_text(const std::vector<ClaimRow>& released,
                                 const std::vector<ClaimRow>& in_use, bool applied) {
    std::string out;
    for (const auto& c : released) {
        out += std::string(applied ? "released " : "would release ") + "claim " + c.claim.key +
               " in " + c.network + ": " + addresses_text(c.claim) + "\n";
    }
    for (const auto& c : in_use) {
        out += "left claim " + c.claim.key + " in " + c.network + ": " + use_text(c.claim) +
               " (delete the pod first, or --force to free its addresses under it)\n";
    }
    out += std::to_string(released.size()) +
           (applied ? " claims released" : " claims would be released (dry run; --apply to act)") +
           "\n";
    return out;
}

}  // namespace shmipam::tools
