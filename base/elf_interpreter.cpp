#include "base/elf_interpreter.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace shmipam {

namespace {

// A PT_INTERP longer than this is no loader path (PATH_MAX bounds what the kernel accepts).
constexpr size_t kLongestInterpreter = 4096;

bool read_at(int fd, void* to, size_t size, off_t at) {
    return ::pread(fd, to, size, at) == ssize_t(size);
}

}  // namespace

std::optional<std::string> elf_interpreter(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::optional<std::string> found;
    Elf64_Ehdr eh{};
    if (read_at(fd, &eh, sizeof eh, 0) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
        for (unsigned i = 0; i < eh.e_phnum && !found; ++i) {
            Elf64_Phdr ph{};
            if (!read_at(fd, &ph, sizeof ph, off_t(eh.e_phoff + i * sizeof ph))) break;
            if (ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz > kLongestInterpreter)
                continue;
            std::string name(ph.p_filesz, '\0');
            if (!read_at(fd, name.data(), name.size(), off_t(ph.p_offset))) break;
            name.resize(std::strlen(name.c_str()));  // PT_INTERP ends in a NUL
            found = name;
        }
    }
    ::close(fd);
    return found;
}

}  // namespace shmipam
