#include "pools/sticky.h"

#include <cctype>
#include <string_view>

namespace shmipam::pools {

namespace {

// Longer than any node lives; keeps the arithmetic far from overflow.
constexpr int64_t kMaxIdleSeconds = int64_t{100} * 365 * 24 * 3600;

// The annotation's value and the key it was found under: shmipam's name first, then the alias.
struct Found {
    const std::string* value = nullptr;
    const char* key = nullptr;
};

Found find_annotation(const PodFacts& pod, const char* key, const char* alias) {
    for (const char* k : {key, alias}) {
        auto it = pod.annotations.find(k);
        if (it != pod.annotations.end()) return {&it->second, k};
    }
    return {};
}

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// Go's strconv.ParseBool, which is how Kubernetes-style tools read a boolean annotation.
std::optional<bool> parse_bool(std::string_view s) {
    for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
        if (s == t) return true;
    }
    for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
        if (s == f) return false;
    }
    return std::nullopt;
}

std::string pod_name(const PodFacts& pod) {
    return pod.namespace_ + "/" + pod.name;
}

// Seconds in "90m", "48h", "1h30m", "5s": whole numbers, each followed by h, m or s.
std::optional<int64_t> parse_duration(std::string_view s) {
    if (s.empty()) return std::nullopt;
    int64_t total = 0;
    while (!s.empty()) {
        int64_t n = 0;
        size_t digits = 0;
        while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) {
            n = n * 10 + (s[digits] - '0');
            if (n > kMaxIdleSeconds) return std::nullopt;
            ++digits;
        }
        if (digits == 0 || digits == s.size()) return std::nullopt;  // no number, or no unit
        const char unit = s[digits];
        s.remove_prefix(digits + 1);
        // "ms" and the like would read as minutes then a stray "s": refuse sub-second units.
        if (!s.empty() && !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
        const int64_t scale = unit == 'h' ? 3600 : unit == 'm' ? 60 : unit == 's' ? 1 : 0;
        if (scale == 0 || n > kMaxIdleSeconds / scale) return std::nullopt;
        total += n * scale;
        if (total > kMaxIdleSeconds) return std::nullopt;
    }
    return total;
}

}  // namespace

std::string StickyIdentity::key() const {
    return std::string(kind == StickyKind::kStatefulSet ? "sts:" : "vm:") + namespace_ + "/" +
           name + "/" + ifname;
}

std::string StickyIdentity::display() const {
    return namespace_ + "/" + name;
}

Expected<std::optional<StickyIdentity>> sticky_identity(const PodFacts& pod, bool config_fixed_ip) {
    const Found asked = find_annotation(pod, kStaticIpAnnotation, kStaticIpAlias);
    bool wants = config_fixed_ip;
    if (asked.value != nullptr) {
        auto b = parse_bool(trimmed(*asked.value));
        if (!b) {
            return make_error(Code::kPoolAnnotationInvalid,
                              "pod " + pod_name(pod) + ": annotation " + asked.key + " is \"" +
                                  *asked.value + "\"; it must be \"true\" or \"false\"");
        }
        wants = *b;
    }
    if (!wants) return std::optional<StickyIdentity>{};

    std::optional<StickyIdentity> id;
    auto sts = pod.labels.find(kStatefulSetPodNameLabel);
    auto vm = pod.labels.find(kKubeVirtVmLabel);
    if (sts != pod.labels.end() && !pod.name.empty() && sts->second == pod.name) {
        id = StickyIdentity{StickyKind::kStatefulSet, pod.namespace_, pod.name, pod.ifname};
    } else if (vm != pod.labels.end() && !vm->second.empty()) {
        id = StickyIdentity{StickyKind::kKubeVirt, pod.namespace_, vm->second, pod.ifname};
    }
    if (!id) {
        // The config's switch is for pods that can keep a name; it leaves the others ordinary.
        if (asked.value == nullptr) return std::optional<StickyIdentity>{};
        return make_error(
            Code::kPoolAnnotationInvalid,
            "pod " + pod_name(pod) + " asks for a static IP (annotation " + asked.key +
                ") but is not a StatefulSet pod (no label " + kStatefulSetPodNameLabel + "=" +
                pod.name + ") nor a KubeVirt VM's pod (no label " + kKubeVirtVmLabel +
                "): only a pod whose name outlives it can keep an address; remove the annotation "
                "or run the pod in a StatefulSet",
            "the pod's labels come from the CNI config's args.cni.labels");
    }
    if (id->namespace_.empty() || id->ifname.empty()) {
        return make_error(Code::kInvalidEnv,
                          "pod " + pod_name(pod) +
                              " keeps its address by name, but the call does not say its "
                              "namespace (CNI_ARGS K8S_POD_NAMESPACE) or interface (CNI_IFNAME)");
    }
    return id;
}

Expected<ClaimPolicy> claim_policy(const PodFacts& pod) {
    const Found found = find_annotation(pod, kClaimPolicyAnnotation, kClaimPolicyAlias);
    if (found.value == nullptr) return ClaimPolicy{};
    const std::string_view v = trimmed(*found.value);
    if (v.empty()) return ClaimPolicy{};
    // A bare number is hours, as the design document defines it.
    const bool bare = v.find_first_not_of("0123456789") == std::string_view::npos;
    const std::string as_hours = bare ? std::string(v) + "h" : std::string();
    const std::optional<int64_t> seconds = parse_duration(bare ? std::string_view(as_hours) : v);
    if (!seconds) {
        return make_error(Code::kPoolAnnotationInvalid,
                          "pod " + pod_name(pod) + ": annotation " + found.key + " is \"" +
                              *found.value +
                              "\"; it must be empty (never reclaim), 0 (free at DEL), a number "
                              "of hours, or a duration such as 90m, 48h or 1h30m (at most 100 "
                              "years)");
    }
    if (*seconds == 0) return ClaimPolicy{ClaimPolicy::Kind::kAtDelete, 0};
    return ClaimPolicy{ClaimPolicy::Kind::kAfterIdle, *seconds};
}

std::string describe(const ClaimPolicy& p) {
    switch (p.kind) {
        case ClaimPolicy::Kind::kNever:
            return "never";
        case ClaimPolicy::Kind::kAtDelete:
            return "at DEL";
        case ClaimPolicy::Kind::kAfterIdle:
            break;
    }
    std::string out;
    const int64_t h = p.idle_seconds / 3600, m = p.idle_seconds / 60 % 60, s = p.idle_seconds % 60;
    if (h != 0) out += std::to_string(h) + "h";
    if (m != 0) out += std::to_string(m) + "m";
    if (s != 0 || out.empty()) out += std::to_string(s) + "s";
    return out + " idle";
}

}  // namespace shmipam::pools
