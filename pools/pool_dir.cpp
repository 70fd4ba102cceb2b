#include "pools/pool_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include "base/bounded_read.h"
#include "base/directory.h"
#include "base/yaml_json.h"

namespace shmipam::pools {

using nlohmann::json;

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Bounds of one pool file (docs/pools.md "Bounds of a pool file"). A real directory of 1,000
// pools is a few hundred KB with a few dozen nodes per pool, so each bound is far above any real
// file and far below what would hurt a node.
// Bytes: 16 MiB is ~50 times a 1,000-pool directory in one file.
constexpr size_t kMaxPoolFileBytes = size_t(16) << 20;
// The YAML bounds (base/yaml_json.h): alias uses (real pool files use none or a few); nodes after
// alias expansion (the bound that stops the alias bomb, "billion laughs", in time and memory);
// nesting (a pool object is under 10 deep).
base::YamlBounds pool_file_bounds() {
    base::YamlBounds b;
    b.of = "one pool file";
    b.max_aliases = 10'000;
    b.max_nodes = 1'000'000;
    b.max_depth = 64;
    return b;
}

void add_document(Catalog& catalog, const std::string& file, size_t& document, const json& doc) {
    if (doc.is_null()) return;  // an empty document (a trailing `---`)
    const std::string kind = doc.is_object() ? doc.value("kind", "") : "";
    if (doc.is_object() && ends_with(kind, "List") && doc.contains("items")) {
        if (!doc["items"].is_array()) {
            catalog.add_problem(file, file + ": " + kind + " items must be a list");
            return;
        }
        for (const auto& item : doc["items"]) add_document(catalog, file, document, item);
        return;
    }
    ++document;
    auto decoded = decode_object(doc, Origin{file, document});
    if (decoded) {
        catalog.add(std::move(*decoded));
        return;
    }
    catalog.add_problem(file, decoded.error().msg);
    // The object by that name is out of service: say why when it is asked for.
    if (doc.is_object() && doc.contains("metadata") && doc["metadata"].is_object() &&
        doc["metadata"].contains("name") && doc["metadata"]["name"].is_string()) {
        catalog.withdraw(doc["metadata"]["name"].get<std::string>(), decoded.error().msg);
    }
}

}  // namespace

void load_text(Catalog& catalog, const std::string& file_name, const std::string& text) {
    size_t document = 0;
    if (text.size() > kMaxPoolFileBytes) {
        catalog.add_problem(file_name, file_name + ": is larger than " +
                                           std::to_string(kMaxPoolFileBytes >> 20) +
                                           " MiB (the bound for one pool file)");
        return;
    }
    if (ends_with(file_name, ".json")) {
        json doc = json::parse(text, nullptr, false);
        if (doc.is_discarded()) {
            catalog.add_problem(file_name, file_name + ": not valid JSON");
            return;
        }
        add_document(catalog, file_name, document, doc);
        return;
    }
    const base::YamlDocuments read = base::yaml_to_json(text, pool_file_bounds());
    for (const json& doc : read.documents) add_document(catalog, file_name, document, doc);
    if (!read.problem.empty()) catalog.add_problem(file_name, file_name + ": " + read.problem);
}

namespace {

Expected<std::vector<std::string>> file_names(const std::string& dir) {
    std::vector<std::string> names;
    const int error = base::for_each_entry(dir, [&](std::string_view name) {
        if (name[0] == '.') return;
        if (ends_with(name, ".yaml") || ends_with(name, ".yml") || ends_with(name, ".json")) {
            names.emplace_back(name);
        }
    });
    if (error != 0) {
        return make_error(Code::kInvalidConfig,
                          "poolsDir " + dir + " cannot be read: " + std::strerror(error));
    }
    std::sort(names.begin(), names.end());
    return names;
}

// A file's or the directory's identity and times, as kFieldsBytes raw bytes: size, inode,
// mtime and ctime (nanoseconds), each 8. The newest of its two times goes to `newest` (for the
// racy rule).
constexpr size_t kFieldsBytes = 32;
// A file changed this recently may change again within the same timestamp tick unseen (git's
// racy rule): wider than any filesystem's tick (whole seconds on some, two on FAT).
constexpr int64_t kRacyWindowNs = 2'000'000'000;
bool stat_fields(const std::string& path, char (&out)[kFieldsBytes], int64_t* newest) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    const int64_t f[4] = {int64_t(st.st_size), int64_t(st.st_ino),
                          int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                          int64_t(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
    std::memcpy(out, f, sizeof f);
    *newest = std::max(f[2], f[3]);
    return true;
}

}  // namespace

Expected<std::string> directory_stamp(const std::string& dir, bool* racy) {
    // The directory's own times first: a file added, removed or renamed in or out changes them,
    // so that a stamp can later be checked without listing the directory (stamp_holds).
    char fields[kFieldsBytes];
    int64_t dir_newest = 0;
    if (!stat_fields(dir, fields, &dir_newest)) {
        return make_error(Code::kInvalidConfig,
                          "poolsDir " + dir + " cannot be read: " + std::strerror(errno));
    }
    auto names = file_names(dir);
    if (!names) return names.error();
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const int64_t racy_after = int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec - kRacyWindowNs;
    if (racy != nullptr && dir_newest > racy_after) *racy = true;
    // dir \0 its fields, then name \0 fields per file.
    std::string stamp = dir + '\0';
    stamp.append(fields, kFieldsBytes);
    for (const auto& name : *names) {
        int64_t newest = 0;
        if (!stat_fields(dir + "/" + name, fields, &newest)) continue;  // gone: not read either
        if (racy != nullptr && newest > racy_after) *racy = true;
        stamp += name + '\0';
        stamp.append(fields, kFieldsBytes);
    }
    return stamp;
}

bool stamp_holds(const std::string& dir, std::string_view stamp) {
    // A name up to its NUL, then its fields: false when the stamp ends early or they differ.
    char fields[kFieldsBytes];
    int64_t newest = 0;
    auto holds = [&](std::string_view& rest, const std::string& path_prefix) {
        const size_t end = rest.find('\0');
        if (end == std::string_view::npos || rest.size() - end - 1 < kFieldsBytes) return false;
        const std::string path = path_prefix + std::string(rest.substr(0, end));
        const std::string_view recorded = rest.substr(end + 1, kFieldsBytes);
        rest.remove_prefix(end + 1 + kFieldsBytes);
        return stat_fields(path, fields, &newest) &&
               std::memcmp(fields, recorded.data(), kFieldsBytes) == 0;
    };
    if (stamp.substr(0, stamp.find('\0')) != dir || !holds(stamp, "")) return false;
    while (!stamp.empty()) {
        if (!holds(stamp, dir + "/")) return false;
    }
    return true;
}

Expected<Catalog> load_pools_dir(const std::string& dir) {
    auto listed = file_names(dir);
    if (!listed) return listed.error();
    const std::vector<std::string>& names = *listed;
    Catalog catalog;
    for (const auto& name : names) {
        auto text = base::read_bounded(dir + "/" + name, kMaxPoolFileBytes);
        if (!text) {
            catalog.add_problem(name, name + ": cannot be read: " + text.error().msg);
            continue;
        }
        load_text(catalog, name, *text);
    }
    catalog.finish();
    return catalog;
}

}  // namespace shmipam::pools
