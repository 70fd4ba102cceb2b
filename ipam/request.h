// What one invocation asks of the IPAM, parsed from the CNI environment and config by plugin/
// and passed whole (host-local's main.go shape: the glue decodes, one call decides); and what
// an operation leaves the process. The operations are in ipam/operations.h.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/allocator.h"
#include "engine/state/network_config.h"
#include "ipam/config.h"
#include "pools/pod_facts.h"

namespace shmipam::ipam {

// The pod an attachment is for, as the runtime names it in CNI_ARGS (K8S_POD_*) and the config's
// pod metadata.
struct Pod {
    std::string namespace_, name, uid;
    pools::Labels annotations;  // runtimeConfig "io.kubernetes.cri.pod-annotations"
    pools::Labels labels;       // args.cni.labels (no Kubernetes runtime fills it)
    // Read from the API server (ipam/pod_lookup.h): then the labels and controller are the
    // pod's own, and the annotations the runtime passed are completed with the pod's.
    bool from_api = false;
    std::optional<pools::Controller> controller;
};

// The network's settings as its config names them (ipam/config.h: `network` holds, in ranges
// mode, its range sets, directories and knobs; in pool mode its directories and knobs, each pool
// state opened with a copy of it), and what the runtime asks of this invocation.
struct Request : NetworkSettings {
    engine::AttachmentKey key;  // CNI_CONTAINERID, CNI_IFNAME
    Pod pod;
    std::vector<engine::IpAddress> requested;  // ADD: the addresses asked for
    nlohmann::json prev_result;  // CHECK: the result it compares with (ipam/prev_result.h)
    // GC: the attachments still valid (cni.dev/valid-attachments).
    std::optional<std::vector<engine::AttachmentKey>> valid_attachments;
    // Set by the glue when the invocation log is on: writes a line of its own to the log, with
    // `command` in place of the command's name: a failure of work that is not the command's own
    // ("RECHECK": the StatefulSet recheck, which never fails the command), or an error the
    // command answered without ("ADD-OFFLINE": a claim bound while the API server was away).
    std::function<void(const std::string& command, const Error&)> log_aside;
};

// One address of an ADD's result.
struct IpConfig {
    engine::IpAddress address;
    int prefix = 0;
    std::optional<engine::IpAddress> gateway;
};

struct AddResult {
    std::vector<IpConfig> ips;
    nlohmann::json routes = nlohmann::json::array();
};

// What an operation leaves the process once it returns.
struct Upkeep {
    // Run once the answer is written (journal compaction): a crash there can no longer fail
    // the operation the runtime asked for.
    std::function<void()> after_answer;
    // What the answer was computed with (the mapped states, the pools catalog): a one-shot
    // process exits without tearing them down, since the kernel unmaps and closes everything at
    // exit in one go (docs/performance.md, "Exit").
    std::vector<std::shared_ptr<const void>> keep_until_exit;
};

}  // namespace shmipam::ipam
