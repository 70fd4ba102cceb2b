// shmipamctl claims: every fixed-address claim (docs/fixed-ips.md) of one network or pool state,
// or of all of them; and release --claim, the operator's manual deletion of a claim.
#include "tools/render/claims.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "base/clock.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// The networks a claims verb looks at: the one named, or every one under the run directory.
Expected<std::vector<std::string>> claim_networks(const CommonOptions& common) {
    if (!common.network.empty()) return std::vector<std::string>{common.network};
    std::string err;
    auto names = networks_under(common.run_dir, &err);
    if (!err.empty()) return make_error(Code::kIo, err);
    return names;
}

// Whether the claim is the one of --claim (and --ifname). With the interface the claim is known
// by its fingerprint; without it by its key, which an entry keeps cut at its field's size.
bool names_claim(const ReleaseOptions& o, const engine::ClaimView& c) {
    for (const char* kind : {"sts:", "vm:"}) {
        const std::string prefix = kind + o.claim + "/";
        if (!o.ifname.empty()) {
            if (engine::fingerprint(prefix + o.ifname, o.ifname) == c.fp) return true;
            continue;
        }
        const bool cut = c.key.size() + 1 >= format::kContainerIdBytes;
        if (c.key.rfind(prefix, 0) == 0 &&
            (cut || c.key.find('/', prefix.size()) == std::string::npos)) {
            return true;
        }
        if (cut && prefix.rfind(c.key, 0) == 0) return true;  // cut inside the name itself
    }
    return false;
}

int cmd_claims(const CommonOptions& common) {
    auto listed = list_claims(common);
    if (!listed) return cannot_read(listed.error());
    const std::vector<ClaimRow>& rows = *listed;
    const uint64_t now = base::unix_ns() / 1'000'000'000;
    std::cout << (common.json ? json_text(claims_json(rows, now)) : claims_text(rows, now));
    return kExitClean;
}

}  // namespace

Expected<std::vector<ClaimRow>> list_claims(const CommonOptions& common) {
    auto names = claim_networks(common);
    if (!names) return names.error();
    std::vector<ClaimRow> rows;
    for (const auto& n : *names) {
        auto store = open_network(common.run_dir, n, shm::Access::kReadOnly);
        if (!store) return store.error();
        engine::NetworkConfig none;
        for (auto& c : engine::Allocator(**store, none).claims()) rows.push_back({n, std::move(c)});
    }
    return rows;
}

void register_claims(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand(
        "claims",
        "fixed-address claims: who uses them, their policy, when they expire; claims create "
        "makes one by hand, claims export and claims import back them up and restore them");
    add_network_argument(*verb, common, false);
    add_json_flag(*verb, common);
    register_claims_create(*verb, common, exit_code);
    register_claims_export(*verb, common, exit_code);
    register_claims_import(*verb, common, exit_code);
    // The listing, unless one of claims' own verbs ran (its callback set the exit code).
    verb->callback([verb, &common, &exit_code] {
        if (verb->get_subcommands().empty()) exit_code = cmd_claims(common);
    });
}

int release_claim(const CommonOptions& common, const ReleaseOptions& o) {
    auto names = claim_networks(common);
    if (!names) return cannot_read(names.error());
    std::vector<ClaimRow> released, in_use;
    for (const auto& n : *names) {
        auto store = open_network(common.run_dir, n,
                                  o.apply ? shm::Access::kReadWrite : shm::Access::kReadOnly);
        if (!store) return cannot_read(store.error());
        if (o.apply) (*store)->act_as_invocation();
        engine::NetworkConfig none;
        engine::Allocator alloc(**store, none);
        auto out = alloc.release_claims(
            [&](const engine::ClaimView& c) { return names_claim(o, c); }, o.force, !o.apply);
        if (!out) return cannot_read(out.error());
        for (auto& c : *out) released.push_back({n, std::move(c)});
        if (!o.force) {
            for (auto& c : alloc.claims()) {
                if (names_claim(o, c) && c.use != engine::ClaimView::Use::kIdle &&
                    c.use != engine::ClaimView::Use::kExpiring) {
                    in_use.push_back({n, std::move(c)});
                }
            }
        }
    }
    std::cout << (common.json ? json_text(released_claims_json(released, in_use, o.apply))
                              : released_claims_text(released, in_use, o.apply));
    if (released.empty() && in_use.empty()) {
        std::cerr << "shmipamctl: no claim named " << o.claim
                  << (common.network.empty() ? " in any network" : " in " + common.network) << "\n";
        return kExitViolations;
    }
    return o.apply && in_use.empty() ? kExitClean : kExitViolations;
}

}  // namespace shmipam::tools
