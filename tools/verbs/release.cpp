// shmipamctl release: releases attachments by address, container or pod, through the same CAS
// protocol as the plugin's DEL (a dry run unless --apply).
#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>

#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

int cmd_release(const CommonOptions& common, const ReleaseOptions& o) {
    if (!o.claim.empty()) return release_claim(common, o);
    if (common.network.empty()) return cannot_read("release needs the network (or --claim)");
    auto store = open_network(common.run_dir, common.network, shm::Access::kReadWrite);
    if (!store) return cannot_read(store.error());
    (*store)->act_as_invocation();
    engine::NetworkConfig none;
    engine::Allocator alloc(**store, none);
    if (!o.address.empty()) {
        auto a = engine::IpAddress::parse(o.address);
        if (!a) return cannot_read("not an address: " + o.address);
        return report_released(common.json, o.apply, alloc.release_address(*a, !o.apply));
    }
    if (!o.container.empty()) {
        return report_released(
            common.json, o.apply,
            alloc.release_where(
                [&](const format::Entry& e, const engine::Fingerprint&) {
                    const std::string cid(e.container_id,
                                          strnlen(e.container_id, sizeof e.container_id));
                    const std::string ifn(e.ifname, strnlen(e.ifname, sizeof e.ifname));
                    return cid == o.container && (o.ifname.empty() || ifn == o.ifname);
                },
                !o.apply));
    }
    if (!o.pod.empty()) {
        return report_released(common.json, o.apply,
                               alloc.release_where(
                                   [&](const format::Entry& e, const engine::Fingerprint&) {
                                       return engine::pod_of(e) == o.pod;
                                   },
                                   !o.apply));
    }
    return cannot_read("release needs --address, --container, --pod or --claim");
}

}  // namespace

void register_release(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand(
        "release",
        "release attachments by address, container or pod, or a fixed-address claim (dry run "
        "unless --apply)");
    add_network_argument(*verb, common, false);
    add_json_flag(*verb, common);
    auto o = std::make_shared<ReleaseOptions>();
    verb->add_option("--address", o->address, "the attachment holding this address");
    verb->add_option("--container", o->container, "this container id");
    verb->add_option("--ifname", o->ifname, "with --container: only this interface");
    verb->add_option("--pod", o->pod, "every attachment of this pod (namespace/name)");
    verb->add_option("--claim", o->claim,
                     "the fixed-address claim of this StatefulSet pod or VM "
                     "(namespace/name), in the network given or in every one");
    verb->add_flag("--force", o->force,
                   "with --claim: also a claim in use (its pod loses its addresses)");
    verb->add_flag("--apply", o->apply, "make the changes");
    verb->callback([&common, o, &exit_code] { exit_code = cmd_release(common, *o); });
}

}  // namespace shmipam::tools
