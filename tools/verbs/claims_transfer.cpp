// shmipamctl claims export and claims import: every fixed-address claim of the node as a JSON
// file, and the claims of such a file made again (a node rebuilt, its state lost). Import is
// all or nothing: every record is read and checked against the states first, and one that is
// malformed or conflicts (its pod holds another address, or its address is held by someone
// else) refuses the whole file, named, before anything changes. A claim already there with the
// same addresses is skipped, so importing a file twice changes nothing the second time.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "pools/sticky.h"
#include "tools/claim_plan.h"
#include "tools/claim_store.h"
#include "tools/render/claim_plan.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

namespace {

// The file's format version: a reader refuses another.
constexpr int kExportVersion = 1;
constexpr const char* kVersionKey = "shmipamClaims";
constexpr const char* kPoolStatePrefix = "pool/";

struct ExportOptions {
    std::string out;  // "" or "-": stdout
};

struct ImportOptions {
    std::string file;
    std::vector<std::string> configs;
    bool apply = false;
};

const char* use_word(engine::ClaimView::Use u) {
    switch (u) {
        case engine::ClaimView::Use::kInUse:
            return "in-use";
        case engine::ClaimView::Use::kIdle:
            return "idle";
        case engine::ClaimView::Use::kUnknownSandbox:
            return "in-use-unknown-sandbox";
        case engine::ClaimView::Use::kExpiring:
            return "expiring";
    }
    return "?";
}

int cmd_claims_export(const CommonOptions& common, const ExportOptions& o) {
    auto rows = list_claims(common);
    if (!rows) return cannot_read(rows.error());
    json claims = json::array();
    int exit_code = kExitClean;
    for (const ClaimRow& row : *rows) {
        const engine::ClaimView& c = row.claim;
        if (c.use == engine::ClaimView::Use::kExpiring) continue;  // being released
        auto id = pools::identity_of_key(c.key);
        // A key cut at the entry's 72 bytes cannot be spelled again: named, left out.
        if (!id || id->key() != c.key) {
            std::cerr << "shmipamctl: the claim " << c.key << " in " << row.network
                      << " has a key cut at the entry's size: not exported\n";
            exit_code = kExitViolations;
            continue;
        }
        json addresses = json::array();
        for (const auto& a : c.addresses) addresses.push_back(a.to_string());
        claims.push_back(
            {{"network", row.network},
             {"kind", id->kind == pools::StickyKind::kKubeVirt ? "vm" : "sts"},
             {"namespace", id->namespace_},
             {"name", id->name},
             {"ifname", id->ifname},
             {"addresses", std::move(addresses)},
             {"policy", policy_word(c.keep_idle, id->kind == pools::StickyKind::kKubeVirt)},
             {"use", use_word(c.use)},
             {"containerID", c.container_id},
             {"idleSinceUnixS", c.idle_since_unix_s},
             {"createdUnixNs", c.created_unix_ns}});
    }
    const std::string text = json{{kVersionKey, kExportVersion}, {"claims", claims}}.dump(2) + "\n";
    if (o.out.empty() || o.out == "-") {
        std::cout << text;
        return exit_code;
    }
    const size_t slash = o.out.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : o.out.substr(0, slash);
    const std::string name = slash == std::string::npos ? o.out : o.out.substr(slash + 1);
    if (auto st = replace_file_atomically(dir, name, text, 0600); !st) {
        return cannot_read(st.error());
    }
    return exit_code;
}

// One record of an import file, checked field by field.
struct ImportRecord {
    std::string network;
    WantedClaim wanted;
};

Expected<std::string> string_field(const json& r, const char* key, const std::string& where) {
    auto it = r.find(key);
    if (it == r.end() || !it->is_string()) {
        return make_error(Code::kDecode, where + "." + key + " must be a string");
    }
    return it->get<std::string>();
}

Expected<ImportRecord> read_record(const json& r, const std::string& where) {
    if (!r.is_object()) return make_error(Code::kDecode, where + " must be an object");
    ImportRecord out;
    auto network = string_field(r, "network", where);
    if (!network) return network.error();
    out.network = *network;
    auto kind = string_field(r, "kind", where);
    if (!kind) return kind.error();
    if (*kind != "sts" && *kind != "vm") {
        return make_error(Code::kDecode, where + ".kind must be \"sts\" or \"vm\"");
    }
    out.wanted.vm = *kind == "vm";
    auto ns = string_field(r, "namespace", where);
    if (!ns) return ns.error();
    auto name = string_field(r, "name", where);
    if (!name) return name.error();
    auto who = parse_pod_name(*ns + "/" + *name);
    if (!who) return make_error(Code::kDecode, where + ": " + who.error().msg);
    out.wanted.who = *who;
    auto ifname = string_field(r, "ifname", where);
    if (!ifname) return ifname.error();
    if (ifname->empty() || ifname->find_first_of("/: ") != std::string::npos) {
        return make_error(Code::kDecode, where + ".ifname \"" + *ifname + "\" is not one");
    }
    out.wanted.ifname = *ifname;
    auto addresses = r.find("addresses");
    if (addresses == r.end() || !addresses->is_array() || addresses->empty()) {
        return make_error(Code::kDecode, where + ".addresses must be a non-empty array");
    }
    for (const json& a : *addresses) {
        auto parsed = a.is_string() ? engine::IpAddress::parse(a.get<std::string>())
                                    : std::optional<engine::IpAddress>{};
        if (!parsed)
            return make_error(Code::kDecode, where + ".addresses: not an address: " + a.dump());
        out.wanted.addresses.push_back(*parsed);
    }
    auto policy = string_field(r, "policy", where);
    if (!policy) return policy.error();
    auto keep_idle = parse_policy(*policy);
    if (!keep_idle) return make_error(Code::kDecode, where + ": " + keep_idle.error().msg);
    out.wanted.keep_idle = *keep_idle;
    return out;
}

// The config a record's network is served by: ranges mode by the network's name, pool mode by
// a config whose pools directory has the pool.
const ClaimNetwork* network_for(const std::vector<ClaimNetwork>& nets, const std::string& network) {
    for (const ClaimNetwork& n : nets) {
        if (network.starts_with(kPoolStatePrefix)) {
            if (n.catalog && n.catalog->pool(network.substr(std::strlen(kPoolStatePrefix)))) {
                return &n;
            }
        } else if (!n.catalog && n.network.name == network) {
            return &n;
        }
    }
    return nullptr;
}

int cmd_claims_import(const CommonOptions& common, const ImportOptions& o) {
    auto text = read_input(o.file);
    if (!text) return cannot_read(text.error());
    const json doc = json::parse(*text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return cannot_read(o.file + " is not JSON");
    if (!doc.contains(kVersionKey) || doc[kVersionKey] != kExportVersion) {
        return cannot_read(o.file + " is not a claims export of version " +
                           std::to_string(kExportVersion) + " (\"" + kVersionKey + "\")");
    }
    if (!doc.contains("claims") || !doc["claims"].is_array()) {
        return cannot_read(o.file + ": \"claims\" must be an array");
    }
    std::vector<ClaimNetwork> nets;
    for (const std::string& path : o.configs) {
        auto n = read_claim_network(path, common.run_dir);
        if (!n) return cannot_read(n.error());
        nets.push_back(std::move(*n));
    }
    // Every record read and planned before anything changes.
    std::vector<ClaimPlan> plans;
    std::vector<const ClaimNetwork*> plan_nets;
    std::map<std::string, size_t> seen;  // "<state> <key>" and "<state> <address>": the record
    for (size_t i = 0; i < doc["claims"].size(); ++i) {
        const std::string where = "claims[" + std::to_string(i) + "]";
        auto rec = read_record(doc["claims"][i], where);
        if (!rec) return cannot_read(rec.error());
        const ClaimNetwork* net = network_for(nets, rec->network);
        if (net == nullptr) {
            return cannot_read(where + ": no --config serves network " + rec->network);
        }
        auto plan = plan_claim(*net, rec->wanted);
        if (!plan) return cannot_read(where + ": " + plan.error().msg);
        // Cluster mode: what the store holds is checked too (nothing written yet).
        if (auto st = hold_in_cluster_store(*net, *plan, false); !st) {
            return cannot_read(where + ": " + st.error().msg);
        }
        if (plan->state != rec->network) {
            return cannot_read(where + ": " + rec->wanted.addresses[0].to_string() +
                               " belongs to " + plan->state + ", not " + rec->network);
        }
        std::vector<std::string> keys{plan->state + " " + plan->key};
        for (const auto& a : rec->wanted.addresses)
            keys.push_back(plan->state + " " + a.to_string());
        for (const std::string& k : keys) {
            if (auto [it, fresh] = seen.emplace(k, i); !fresh) {
                return cannot_read(where + " and claims[" + std::to_string(it->second) +
                                   "] both name " + k);
            }
        }
        plans.push_back(std::move(*plan));
        plan_nets.push_back(net);
    }
    bool conflicts = false, work = false;
    for (const ClaimPlan& p : plans) {
        conflicts = conflicts || p.status == ClaimPlan::Status::kConflict;
        work = work || p.status == ClaimPlan::Status::kCreate;
    }
    const bool apply = o.apply && !conflicts;
    if (apply) {
        for (size_t k = 0; k < plans.size(); ++k) {
            if (plans[k].status != ClaimPlan::Status::kCreate) continue;
            if (auto st = hold_in_cluster_store(*plan_nets[k], plans[k], true); !st) {
                return cannot_read(st.error());
            }
            if (plans[k].status != ClaimPlan::Status::kCreate) {
                conflicts = true;  // taken in the store since the check
                continue;
            }
            if (auto st = apply_claim(*plan_nets[k], plans[k]); !st) return cannot_read(st.error());
            conflicts = conflicts || plans[k].status == ClaimPlan::Status::kConflict;
        }
    }
    std::cout << (common.json ? json_text(claim_plans_json(plans, apply))
                              : claim_plans_text(plans, apply));
    if (conflicts) {
        for (const ClaimPlan& p : plans) {
            if (p.status == ClaimPlan::Status::kConflict) {
                std::cerr << "shmipamctl: refused: " << p.key << " in " << p.state << ": " << p.why
                          << "\n";
            }
        }
        if (!apply) std::cerr << "shmipamctl: nothing imported\n";
        return kExitCannotRead;
    }
    return !apply && work ? kExitViolations : kExitClean;
}

}  // namespace

void register_claims_export(CLI::App& claims, CommonOptions& common, int& exit_code) {
    auto* verb = claims.add_subcommand(
        "export", "every fixed-address claim under the run directory as JSON, for claims import");
    auto o = std::make_shared<ExportOptions>();
    verb->add_option("--network", common.network, "only this network or pool/<name>");
    verb->add_option("--out", o->out, "write to this file (atomically) instead of stdout");
    verb->callback([&common, o, &exit_code] { exit_code = cmd_claims_export(common, *o); });
}

void register_claims_import(CLI::App& claims, CommonOptions& common, int& exit_code) {
    auto* verb = claims.add_subcommand(
        "import",
        "make the claims of a claims export again; all or nothing, a claim already there is "
        "skipped (dry run unless --apply)");
    auto o = std::make_shared<ImportOptions>();
    verb->add_option("file", o->file, "the export (- for stdin)")->required();
    verb->add_option("--config", o->configs,
                     "the network config file of the claims' networks (repeat)")
        ->required();
    verb->add_flag("--apply", o->apply, "make the claims");
    add_json_flag(*verb, common);
    verb->callback([&common, o, &exit_code] { exit_code = cmd_claims_import(common, *o); });
}

}  // namespace shmipam::tools
