#include "pools/pool_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include "base/directory.h"

namespace shmipam::pools {

using nlohmann::json;

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// YAML 1.2 core schema for plain scalars (what Kubernetes' YAML reader gives): null, booleans,
// integers; quoted and block scalars are always strings.
json scalar_to_json(const yaml_node_t& n) {
    const std::string s(reinterpret_cast<const char*>(n.data.scalar.value), n.data.scalar.length);
    if (n.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return s;
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+') {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (errno == 0 && end != nullptr && *end == '\0') return v;
    }
    return s;
}

// Bounds of one pool file (docs/pools.md "Bounds of a pool file"). A real directory of 1,000
// pools is a few hundred KB with a few dozen nodes per pool, so each bound is far above any real
// file and far below what would hurt a node.
// Bytes: read at most this + 1; 16 MiB is ~50 times a 1,000-pool directory in one file.
constexpr size_t kMaxPoolFileBytes = size_t(16) << 20;
// Alias uses: real pool files use none or a few; 10,000 is generous.
constexpr size_t kMaxPoolFileAliases = 10'000;
// Nodes after alias expansion (libyaml shares an aliased node, the conversion to JSON copies it):
// the bound that stops the alias bomb (billion laughs) in time and memory.
constexpr size_t kMaxPoolFileNodes = 1'000'000;
// Nesting depth: a pool object is under 10 deep; 64 bounds the converter's recursion (stack).
constexpr int kMaxPoolFileDepth = 64;

struct Budget {
    size_t nodes = 0;
    std::string over;  // set once a bound is passed: what it was
};

// Alias uses in a loaded document: the loader resolves each alias to a reference to the anchored
// node, so every reference beyond the one each non-root node has in a tree is an alias.
size_t alias_uses(yaml_document_t& doc) {
    size_t refs = 0;
    const size_t nodes = size_t(doc.nodes.top - doc.nodes.start);
    for (yaml_node_t* n = doc.nodes.start; n < doc.nodes.top; ++n) {
        if (n->type == YAML_SEQUENCE_NODE)
            refs += size_t(n->data.sequence.items.top - n->data.sequence.items.start);
        if (n->type == YAML_MAPPING_NODE)
            refs += 2 * size_t(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    }
    return nodes == 0 || refs < nodes - 1 ? 0 : refs - (nodes - 1);
}

// A node of a loaded document as JSON, within the budget: a node past a bound is not followed,
// budget.over says which bound.
json to_json(yaml_document_t& doc, int index, int depth, Budget& budget) {
    if (!budget.over.empty()) return nullptr;
    if (depth > kMaxPoolFileDepth) {
        budget.over = "nests deeper than " + std::to_string(kMaxPoolFileDepth) +
                      " levels (the bound for one pool file)";
        return nullptr;
    }
    if (++budget.nodes > kMaxPoolFileNodes) {
        budget.over = "expands to more than 1,000,000 YAML nodes (the bound for one pool file)";
        return nullptr;
    }
    yaml_node_t* n = yaml_document_get_node(&doc, index);
    if (n == nullptr) return nullptr;
    switch (n->type) {
        case YAML_SCALAR_NODE:
            return scalar_to_json(*n);
        case YAML_SEQUENCE_NODE: {
            json a = json::array();
            for (yaml_node_item_t* i = n->data.sequence.items.start; i < n->data.sequence.items.top;
                 ++i) {
                a.push_back(to_json(doc, *i, depth + 1, budget));
            }
            return a;
        }
        case YAML_MAPPING_NODE: {
            json o = json::object();
            for (yaml_node_pair_t* p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
                 ++p) {
                json key = to_json(doc, p->key, depth + 1, budget);
                o[key.is_string() ? key.get<std::string>() : key.dump()] =
                    to_json(doc, p->value, depth + 1, budget);
            }
            return o;
        }
        case YAML_NO_NODE:
            break;
    }
    return nullptr;
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

std::optional<std::string> read_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            errno = e;
            return std::nullopt;
        }
        if (n == 0) break;
        out.append(buf, size_t(n));
        if (out.size() > kMaxPoolFileBytes) break;  // load_text refuses it: read no more
    }
    ::close(fd);
    return out;
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
    yaml_parser_t parser;
    if (yaml_parser_initialize(&parser) == 0) {
        catalog.add_problem(file_name, file_name + ": out of memory reading YAML");
        return;
    }
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
    for (;;) {
        yaml_document_t doc;
        if (yaml_parser_load(&parser, &doc) == 0) {
            catalog.add_problem(file_name, file_name + ": not valid YAML: " +
                                               (parser.problem ? parser.problem : "parse error") +
                                               " at line " +
                                               std::to_string(parser.problem_mark.line + 1));
            break;
        }
        const bool end = yaml_document_get_root_node(&doc) == nullptr;  // the stream's end
        if (!end) {
            Budget budget;
            json converted;
            if (alias_uses(doc) > kMaxPoolFileAliases) {
                budget.over = "uses more than " + std::to_string(kMaxPoolFileAliases) +
                              " YAML aliases (the bound for one pool file)";
            } else {
                converted = to_json(doc, 1, 0, budget);
            }
            if (!budget.over.empty()) {
                catalog.add_problem(file_name, file_name + ": " + budget.over);
                yaml_document_delete(&doc);
                break;
            }
            add_document(catalog, file_name, document, converted);
        }
        yaml_document_delete(&doc);
        if (end) break;
    }
    yaml_parser_delete(&parser);
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
        auto text = read_file(dir + "/" + name);
        if (!text) {
            catalog.add_problem(name, name + ": cannot be read: " + std::strerror(errno));
            continue;
        }
        load_text(catalog, name, *text);
    }
    catalog.finish();
    return catalog;
}

}  // namespace shmipam::pools
