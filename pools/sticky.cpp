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

std::optional<StickyIdentity> identity_of_key(std::string_view key) {
    StickyIdentity id;
    if (key.starts_with("sts:")) {
        id.kind = StickyKind::kStatefulSet;
    } else if (key.starts_with("vm:")) {
        id.kind = StickyKind::kKubeVirt;
    } else {
        return std::nullopt;
    }
    key.remove_prefix(key.find(':') + 1);
    const size_t a = key.find('/');
    const size_t b = a == std::string_view::npos ? a : key.find('/', a + 1);
    if (b == std::string_view::npos || key.find('/', b + 1) != std::string_view::npos) {
        return std::nullopt;
    }
    id.namespace_ = key.substr(0, a);
    id.name = key.substr(a + 1, b - a - 1);
    id.ifname = key.substr(b + 1);
    if (id.namespace_.empty() || id.name.empty() || id.ifname.empty()) return std::nullopt;
    return id;
}

namespace {

std::string_view api_group(std::string_view api_version) {
    const size_t slash = api_version.find('/');
    return slash == std::string_view::npos ? std::string_view() : api_version.substr(0, slash);
}

// Who the pod is, as far as its facts tell: a StatefulSet's pod, a KubeVirt VM's, or neither.
std::optional<StickyIdentity> identity_from_facts(const PodFacts& pod) {
    auto vm = pod.labels.find(kKubeVirtVmLabel);
    if (pod.from_api) {
        const auto& c = pod.controller;
        if (c && c->kind == kStatefulSetKind && api_group(c->api_version) == kStatefulSetApiGroup) {
            auto member = statefulset_member(pod.name);
            if (member && member->set == c->name) {
                return StickyIdentity{StickyKind::kStatefulSet, pod.namespace_, pod.name,
                                      pod.ifname};
            }
            return std::nullopt;
        }
        if (c && c->kind == kKubeVirtVmiKind && api_group(c->api_version) == kKubeVirtApiGroup) {
            // The VMI is named after its VM; the label, when set, says so too.
            const std::string& name =
                vm != pod.labels.end() && !vm->second.empty() ? vm->second : c->name;
            return StickyIdentity{StickyKind::kKubeVirt, pod.namespace_, name, pod.ifname};
        }
    } else {
        auto sts = pod.labels.find(kStatefulSetPodNameLabel);
        if (sts != pod.labels.end() && !pod.name.empty() && sts->second == pod.name) {
            return StickyIdentity{StickyKind::kStatefulSet, pod.namespace_, pod.name, pod.ifname};
        }
    }
    if (vm != pod.labels.end() && !vm->second.empty()) {
        return StickyIdentity{StickyKind::kKubeVirt, pod.namespace_, vm->second, pod.ifname};
    }
    return std::nullopt;
}

std::string not_sticky_reason(const PodFacts& pod) {
    if (pod.from_api) {
        return pod.controller ? "its controller is " + pod.controller->kind + " " +
                                    pod.controller->name + ", not a StatefulSet or a KubeVirt VM"
                              : "it has no controller (a bare pod), not a StatefulSet or a "
                                "KubeVirt VM";
    }
    return std::string("it is not a StatefulSet pod (no label ") + kStatefulSetPodNameLabel + "=" +
           pod.name + ") nor a KubeVirt VM's pod (no label " + kKubeVirtVmLabel + ")";
}

}  // namespace

StaticIpAsked static_ip_asked(const PodFacts& pod) {
    const Found asked = find_annotation(pod, kStaticIpAnnotation, kStaticIpAlias);
    if (asked.value == nullptr) return StaticIpAsked::kAbsent;
    const auto b = parse_bool(trimmed(*asked.value));
    if (!b) return StaticIpAsked::kMalformed;
    return *b ? StaticIpAsked::kYes : StaticIpAsked::kNo;
}

Expected<std::optional<StickyIdentity>> sticky_identity(const PodFacts& pod,
                                                        const StickyRules& rules) {
    const Found asked = find_annotation(pod, kStaticIpAnnotation, kStaticIpAlias);
    bool wants = rules.config_fixed_ip;
    if (asked.value != nullptr) {
        auto b = parse_bool(trimmed(*asked.value));
        if (!b) {
            return make_error(Code::kPoolAnnotationInvalid,
                              "pod " + pod_name(pod) + ": annotation " + asked.key + " is \"" +
                                  *asked.value + "\"; it must be \"true\" or \"false\"");
        }
        wants = *b;
    }
    std::optional<StickyIdentity> id = identity_from_facts(pod);
    const bool by_default = !wants && asked.value == nullptr && rules.statefulset_default &&
                            pod.from_api && id && id->kind == StickyKind::kStatefulSet;
    if (!wants && !by_default) return std::optional<StickyIdentity>{};
    if (!id) {
        // The config's switch is for pods that can keep a name; it leaves the others ordinary.
        if (asked.value == nullptr) return std::optional<StickyIdentity>{};
        return make_error(
            Code::kPoolAnnotationInvalid,
            "pod " + pod_name(pod) + " asks for a static IP (annotation " + asked.key + ") but " +
                not_sticky_reason(pod) +
                ": only a pod whose name outlives it can keep an address; remove the annotation "
                "or run the pod in a StatefulSet",
            pod.from_api ? "the pod's controller as the API server gives it"
                         : "the pod's labels come from the CNI config's args.cni.labels; with "
                           "ipam.kubernetes set they are read from the API server");
    }
    id->by_default = by_default;
    if (id->namespace_.empty() || id->ifname.empty()) {
        return make_error(Code::kInvalidEnv,
                          "pod " + pod_name(pod) +
                              " keeps its address by name, but the call does not say its "
                              "namespace (CNI_ARGS K8S_POD_NAMESPACE) or interface (CNI_IFNAME)");
    }
    return id;
}

std::optional<SetMember> statefulset_member(std::string_view pod_name) {
    const size_t dash = pod_name.rfind('-');
    if (dash == std::string_view::npos || dash == 0 || dash + 1 == pod_name.size()) {
        return std::nullopt;
    }
    const std::string_view digits = pod_name.substr(dash + 1);
    // An ordinal is at most 2^31 - 1 (spec.replicas is an int32): ten digits.
    constexpr size_t kMaxOrdinalDigits = 10;
    if (digits.size() > kMaxOrdinalDigits || (digits.size() > 1 && digits.front() == '0')) {
        return std::nullopt;
    }
    int64_t ordinal = 0;
    for (char ch : digits) {
        if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
        ordinal = ordinal * 10 + (ch - '0');
    }
    return SetMember{std::string(pod_name.substr(0, dash)), ordinal};
}

bool statefulset_wants(const SetState& set, int64_t ordinal) {
    if (!set.exists || set.deleting) return false;
    return ordinal >= set.ordinals_start && ordinal - set.ordinals_start < set.replicas;
}

Expected<ClaimPolicy> claim_policy(const PodFacts& pod, bool owner_default) {
    const ClaimPolicy unasked{
        owner_default ? ClaimPolicy::Kind::kWhileOwnerWants : ClaimPolicy::Kind::kNever, 0};
    const Found found = find_annotation(pod, kClaimPolicyAnnotation, kClaimPolicyAlias);
    if (found.value == nullptr) return unasked;
    const std::string_view v = trimmed(*found.value);
    if (v.empty()) return unasked;
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

bool owner_default_applies(const StickyIdentity& id, bool api) {
    return id.by_default || (id.kind == StickyKind::kKubeVirt && api);
}

std::optional<std::string> launcher_vm_name(std::string_view pod_name) {
    // KubeVirt's generateName "virt-launcher-<vm>-" and the API server's 5-character suffix.
    constexpr size_t kSuffix = 5;
    if (!pod_name.starts_with(kKubeVirtLauncherPrefix) ||
        pod_name.size() < kKubeVirtLauncherPrefix.size() + 2 + kSuffix) {
        return std::nullopt;
    }
    const size_t dash = pod_name.size() - kSuffix - 1;
    if (pod_name[dash] != '-') return std::nullopt;
    return std::string(
        pod_name.substr(kKubeVirtLauncherPrefix.size(), dash - kKubeVirtLauncherPrefix.size()));
}

std::string describe(const ClaimPolicy& p, StickyKind owner) {
    switch (p.kind) {
        case ClaimPolicy::Kind::kNever:
            return "never";
        case ClaimPolicy::Kind::kAtDelete:
            return "at DEL";
        case ClaimPolicy::Kind::kWhileOwnerWants:
            return owner == StickyKind::kKubeVirt ? "while its VM exists"
                                                  : "while its StatefulSet wants it";
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
