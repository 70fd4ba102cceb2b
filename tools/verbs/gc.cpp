// shmipamctl gc: releases every attachment not in a list of live ones (the CNI GC shape), a dry
// run unless --apply; --older-than spares attachments younger than a runtime's startup race.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/clock.h"
#include "engine/slots/entry_fields.h"
#include "ipam/config.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

namespace {

struct GcOptions {
    std::string valid_file;   // a file listing the live attachments, or - for stdin
    double older_than_s = 0;  // spare attachments younger than this
    bool apply = false;
};

int cmd_gc(const CommonOptions& common, const GcOptions& o) {
    auto text = read_input(o.valid_file);
    if (!text) return cannot_read(text.error());
    // The CNI GC shape: a list of {"containerID", "ifname"}, or a config holding
    // "cni.dev/valid-attachments" (read as the plugin's GC reads it: ipam/config.h).
    json doc = json::parse(*text, nullptr, false);
    if (doc.is_object() && doc.contains("cni.dev/valid-attachments"))
        doc = doc["cni.dev/valid-attachments"];
    if (doc.is_discarded()) return cannot_read(o.valid_file + " is not JSON (cut short?)");
    auto valid = ipam::read_valid_attachments(doc, "--valid " + o.valid_file);
    if (!valid) return cannot_read(valid.error());
    std::set<std::pair<uint64_t, uint64_t>> keep;
    for (const auto& a : *valid) {
        const auto f = engine::fingerprint(a.container_id, a.ifname);
        keep.insert({f.fp1, f.fp2});
    }
    auto store = open_network(common.run_dir, common.network, shm::Access::kReadWrite);
    if (!store) return cannot_read(store.error());
    (*store)->act_as_invocation();
    engine::NetworkConfig none;
    engine::Allocator alloc(**store, none);
    const uint64_t now = base::unix_ns();
    const uint64_t grace = uint64_t(o.older_than_s * 1e9);
    return report_released(
        common.json, o.apply,
        alloc.release_where(
            [&](const format::Entry& e, const engine::Fingerprint& f) {
                if (keep.count({f.fp1, f.fp2})) return false;
                // A claim is held for a name, not for a sandbox.
                if (engine::held_for_a_name(e.flags)) return false;
                return grace == 0 || (now > e.created_unix_ns && now - e.created_unix_ns >= grace);
            },
            !o.apply));
}

}  // namespace

void register_gc(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand(
        "gc", "release every attachment not in a list of live ones (dry run unless --apply)");
    add_network_argument(*verb, common);
    add_json_flag(*verb, common);
    auto o = std::make_shared<GcOptions>();
    verb->add_option("--valid", o->valid_file, "JSON list of {containerID, ifname}, or - for stdin")
        ->required();
    verb->add_option("--older-than", o->older_than_s, "only attachments older than this (seconds)");
    verb->add_flag("--apply", o->apply, "make the changes");
    verb->callback([&common, o, &exit_code] { exit_code = cmd_gc(common, *o); });
}

}  // namespace shmipam::tools
