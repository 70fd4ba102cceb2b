#include "tools/render/explain.h"

#include <sstream>

namespace shmipam::tools {

using nlohmann::json;

namespace {

std::string count_of(const pools::Candidate& c, const pools::Catalog& catalog) {
    const pools::IpSet set = c.pool != nullptr ? pools::allocatable(*c.pool, catalog)
                                               : pools::allocatable(*c.subnet, catalog);
    const engine::u128 n = set.count();
    return n > 0xffffffffffffull ? ">2^48" : std::to_string(uint64_t(n));
}

}  // namespace

std::string explain_text(const pools::Selection& s, const pools::Catalog& catalog) {
    std::ostringstream out;
    out << "rule: " << pools::describe(s.rule) << (s.clean_gateway ? " (clean gateway)" : "")
        << "\n";
    for (const auto& fam : s.families) {
        out << pools::family_name(fam.family) << ":\n  named:";
        for (const auto& n : fam.named) out << " " << n;
        out << "\n";
        for (const auto& f : fam.filtered)
            out << "  filtered: " << f.name << ": " << f.reason << "\n";
        out << "  order:";
        if (fam.order.empty()) out << " (none)";
        out << "\n";
        for (size_t i = 0; i < fam.order.size(); ++i) {
            const auto& c = fam.order[i];
            out << "    " << i + 1 << ". " << (c.subnet != nullptr ? "subnet " : "") << c.name
                << " (" << count_of(c, catalog) << " allocatable)\n";
        }
    }
    if (s.families.empty()) out << "no family is served\n";
    if (s.error) {
        out << "an ADD would fail: error " << int(s.error->code) << ": " << s.error->msg << "\n";
    }
    for (const auto& r : s.annotation_routes)
        out << "route from the pod: " << r.dst << " via " << r.gw << "\n";
    if (!catalog.problems().empty()) {
        out << "problems in poolsDir (these objects are out of service):\n";
        for (const auto& p : catalog.problems()) out << "  " << p.message << "\n";
    }
    return out.str();
}

json explain_json(const pools::Selection& s, const pools::Catalog& catalog) {
    json out;
    out["rule"] = pools::describe(s.rule);
    out["cleanGateway"] = s.clean_gateway;
    out["families"] = json::array();
    for (const auto& fam : s.families) {
        json f;
        f["family"] = fam.family == engine::Family::kV4 ? 4 : 6;
        f["named"] = fam.named;
        f["filtered"] = json::array();
        for (const auto& x : fam.filtered)
            f["filtered"].push_back({{"pool", x.name}, {"reason", x.reason}});
        f["order"] = json::array();
        for (const auto& c : fam.order) {
            f["order"].push_back({{"name", c.name},
                                  {"kind", c.subnet != nullptr ? "SpiderSubnet" : "SpiderIPPool"},
                                  {"allocatable", count_of(c, catalog)}});
        }
        out["families"].push_back(f);
    }
    if (s.error) out["error"] = {{"code", int(s.error->code)}, {"msg", s.error->msg}};
    out["problems"] = json::array();
    for (const auto& p : catalog.problems())
        out["problems"].push_back({{"file", p.file}, {"message", p.message}});
    return out;
}

}  // namespace shmipam::tools
