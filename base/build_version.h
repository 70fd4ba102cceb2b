// The build's version, stamped into every shipped binary as a plain string, so that an install
// can tell an older plugin from a newer one by reading the file (never by exec'ing it: the file
// may be half-written, or built for another machine). SHMIPAM_VERSION comes from the project's
// version in CMakeLists.txt, given to each binary's main file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace shmipam {

inline constexpr std::string_view kBuildVersionMarker = "shmipam-build-version:";

// In a binary's main file: SHMIPAM_STAMP_BUILD_VERSION(); kept by the compiler and the linker
// though nothing reads it.
#define SHMIPAM_STAMP_BUILD_VERSION()                                            \
    [[gnu::used, gnu::retain]] static const char shmipam_build_version_stamp[] = \
        "shmipam-build-version:" SHMIPAM_VERSION

struct BuildVersion {
    int major = 0, minor = 0, patch = 0;
    std::string text;
    bool operator<(const BuildVersion& o) const {
        return std::tie(major, minor, patch) < std::tie(o.major, o.minor, o.patch);
    }
};

// "MAJOR.MINOR.PATCH" after `at` in `binary`, if a version is there.
inline std::optional<BuildVersion> parse_build_version(std::string_view binary, size_t at) {
    BuildVersion v;
    size_t i = at;
    int* parts[] = {&v.major, &v.minor, &v.patch};
    for (int k = 0; k < 3; ++k) {
        if (i >= binary.size() || binary[i] < '0' || binary[i] > '9') return std::nullopt;
        while (i < binary.size() && binary[i] >= '0' && binary[i] <= '9') {
            *parts[k] = *parts[k] * 10 + (binary[i++] - '0');
            if (*parts[k] > 1000000) return std::nullopt;
        }
        if (k < 2 && (i >= binary.size() || binary[i++] != '.')) return std::nullopt;
    }
    v.text =
        std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
    return v;
}

// The version stamped in `binary`'s bytes, if it has a stamp (the marker alone, as the code
// that looks for it holds it, is skipped).
inline std::optional<BuildVersion> find_build_version(std::string_view binary) {
    for (size_t at = binary.find(kBuildVersionMarker); at != std::string_view::npos;
         at = binary.find(kBuildVersionMarker, at + 1)) {
        if (auto v = parse_build_version(binary, at + kBuildVersionMarker.size())) return v;
    }
    return std::nullopt;
}

}  // namespace shmipam
