#include "kernel_store.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sycl/backend/opencl.hpp>
#include <sycl/ext/oneapi/backend/level_zero.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>

#include "runtime.hpp"

namespace gnnsparse::sycl_rt {
namespace syclex = sycl::ext::oneapi::experimental;
namespace fs = std::filesystem;
static_assert(sizeof(PackRecord) == 40, "pack records are 40 bytes, no padding");

// ---------------------------------------------------------------------------------------- notes
namespace {
std::atomic<NoteSink> g_sink{nullptr};

bool env_is(const char *name, const char *value) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}
std::string env_or(const char *name, const std::string &fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}
std::string hex(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
std::string ms_text(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", ms);
  return b;
}
}  // namespace

void set_note_sink(NoteSink sink) { g_sink.store(sink); }

void note(NoteLevel level, const std::string &text) {
  if (NoteSink s = g_sink.load()) return s(level, text);
  if (level == NoteLevel::warning || env_is("GNNSPARSE_DEBUG", "1"))
    std::fprintf(stderr, "gnnsparse: %s%s\n", level == NoteLevel::warning ? "warning: " : "", text.c_str());
}

const char *origin_name(Origin o) {
  switch (o) {
    case Origin::cache: return "the kernel cache";
    case Origin::native: return "shipped device binaries";
    case Origin::spirv: return "shipped SPIR-V";
    case Origin::source: return "source";
  }
  return "";
}

std::uint64_t fnv1a(const void *data, std::size_t n, std::uint64_t h) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::uint64_t source_hash() {
  static const std::uint64_t h = [] {
    std::uint64_t v = fnv1a("gnnsparse kernels", 17);
    for (const auto &[name, text] : kernel_sources()) {
      v = fnv1a(name.data(), name.size() + 1, v);  // + the terminating NUL as a separator
      v = fnv1a(text.data(), text.size() + 1, v);
    }
    return v;
  }();
  return h;
}

// ------------------------------------------------------------------------------ the backends
namespace {

std::string read_file(const fs::path &p, bool &ok) {
  std::ifstream f(p, std::ios::binary);
  ok = bool(f);
  if (!ok) return {};
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ok = !f.bad();
  return s;
}

// OpenCL entry points, from the libOpenCL the SYCL runtime's OpenCL adapter already loaded.
struct OpenCl {
  using cl_int = std::int32_t;
  using program = void *;
  using kernel = void *;
  program (*create_with_binary)(void *, std::uint32_t, void *const *, const std::size_t *, const unsigned char **,
                                cl_int *, cl_int *) = nullptr;
  cl_int (*build)(program, std::uint32_t, void *const *, const char *, void *, void *) = nullptr;
  kernel (*create_kernel)(program, const char *, cl_int *) = nullptr;
  cl_int (*program_info)(program, std::uint32_t, std::size_t, void *, std::size_t *) = nullptr;
  cl_int (*release_program)(program) = nullptr;
  bool ok = false;
  static const OpenCl &get() {
    static const OpenCl cl = [] {
      OpenCl c;
      void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (!h) h = dlopen("libOpenCL.so.1", RTLD_NOW);
      if (!h) return c;
      c.create_with_binary = reinterpret_cast<decltype(c.create_with_binary)>(dlsym(h, "clCreateProgramWithBinary"));
      c.build = reinterpret_cast<decltype(c.build)>(dlsym(h, "clBuildProgram"));
      c.create_kernel = reinterpret_cast<decltype(c.create_kernel)>(dlsym(h, "clCreateKernel"));
      c.program_info = reinterpret_cast<decltype(c.program_info)>(dlsym(h, "clGetProgramInfo"));
      c.release_program = reinterpret_cast<decltype(c.release_program)>(dlsym(h, "clReleaseProgram"));
      c.ok = c.create_with_binary && c.build && c.create_kernel && c.program_info && c.release_program;
      return c;
    }();
    return cl;
  }
};

// Level Zero entry points (libze_loader of the GPU driver) and the two descriptors the loader
// fills, as laid out by the Level Zero 1.x specification.
struct LevelZero {
  struct module_desc {
    std::uint32_t stype = 0x1b;  // ZE_STRUCTURE_TYPE_MODULE_DESC
    const void *next = nullptr;
    std::uint32_t format = 1;    // ZE_MODULE_FORMAT_NATIVE
    std::size_t size = 0;
    const std::uint8_t *data = nullptr;
    const char *flags = "";
    const void *constants = nullptr;
  };
  struct kernel_desc {
    std::uint32_t stype = 0x1d;  // ZE_STRUCTURE_TYPE_KERNEL_DESC
    const void *next = nullptr;
    std::uint32_t flags = 0;
    const char *name = nullptr;
  };
  using result = std::int32_t;
  result (*module_create)(ze_context_handle_t, ze_device_handle_t, const module_desc *, ze_module_handle_t *,
                          void **) = nullptr;
  result (*kernel_create)(ze_module_handle_t, const kernel_desc *, ze_kernel_handle_t *) = nullptr;
  result (*module_destroy)(ze_module_handle_t) = nullptr;
  bool ok = false;
  static const LevelZero &get() {
    static const LevelZero ze = [] {
      LevelZero z;
      const std::string lib = env_or("GNNSPARSE_ZE_LOADER", "libze_loader.so.1");  // a test loader may stand in
      void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);
      if (!h) h = dlopen(lib.c_str(), RTLD_NOW);
      if (!h) return z;
      z.module_create = reinterpret_cast<decltype(z.module_create)>(dlsym(h, "zeModuleCreate"));
      z.kernel_create = reinterpret_cast<decltype(z.kernel_create)>(dlsym(h, "zeKernelCreate"));
      z.module_destroy = reinterpret_cast<decltype(z.module_destroy)>(dlsym(h, "zeModuleDestroy"));
      z.ok = z.module_create && z.kernel_create && z.module_destroy;
      return z;
    }();
    return ze;
  }
};

bool is_opencl(const sycl::device &d) { return d.get_backend() == sycl::backend::opencl; }
bool is_level_zero(const sycl::device &d) { return d.get_backend() == sycl::backend::ext_oneapi_level_zero; }

// The device binary of a built bundle (what the cache stores), or empty.
std::string device_binary(const sycl::kernel_bundle<sycl::bundle_state::executable> &kb, const sycl::device &dev) {
  if (is_opencl(dev)) {
    const OpenCl &cl = OpenCl::get();
    if (!cl.ok) return {};
    auto programs = sycl::get_native<sycl::backend::opencl>(kb);
    if (programs.size() != 1) return {};
    std::size_t size = 0;
    if (cl.program_info(programs[0], CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != 0 || size == 0) return {};
    std::string bin(size, '\0');
    unsigned char *p = reinterpret_cast<unsigned char *>(bin.data());
    if (cl.program_info(programs[0], CL_PROGRAM_BINARIES, sizeof p, &p, nullptr) != 0) return {};
    return bin;
  }
  if (is_level_zero(dev)) {  // the backend content of a Level Zero image is native ISA
    for (const auto &img : kb) {
      auto bytes = img.ext_oneapi_get_backend_content();
      return std::string(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    }
  }
  return {};
}

}  // namespace

// A Level Zero module from a native binary, and its kernel `raw_name`; throws on failure.
std::pair<ze_module_handle_t, ze_kernel_handle_t> ze_module_kernel(ze_context_handle_t zctx, ze_device_handle_t zdev,
                                                                   const std::string &bin,
                                                                   const std::string &raw_name) {
  const LevelZero &ze = LevelZero::get();
  if (!ze.ok) throw std::runtime_error("libze_loader not available");
  LevelZero::module_desc md;
  md.size = bin.size();
  md.data = reinterpret_cast<const std::uint8_t *>(bin.data());
  ze_module_handle_t mod = nullptr;
  if (ze.module_create(zctx, zdev, &md, &mod, nullptr) != 0 || !mod)
    throw std::runtime_error("zeModuleCreate(native) failed");
  LevelZero::kernel_desc kd;
  kd.name = raw_name.c_str();
  ze_kernel_handle_t zk = nullptr;
  if (ze.kernel_create(mod, &kd, &zk) != 0 || !zk) {
    ze.module_destroy(mod);
    throw std::runtime_error("the binary has no kernel " + raw_name);
  }
  return {mod, zk};
}

namespace {

// A kernel from a device binary through the backend's binary path; throws on failure.
sycl::kernel from_binary(const sycl::context &ctx, const sycl::device &dev, const std::string &bin,
                         const std::string &raw_name) {
  if (is_opencl(dev)) {
    const OpenCl &cl = OpenCl::get();
    if (!cl.ok) throw std::runtime_error("libOpenCL not available");
    void *cctx = sycl::get_native<sycl::backend::opencl>(ctx);
    void *cdev = sycl::get_native<sycl::backend::opencl>(dev);
    const std::size_t size = bin.size();
    const auto *data = reinterpret_cast<const unsigned char *>(bin.data());
    std::int32_t status = 0, err = 0;
    void *prog = cl.create_with_binary(cctx, 1, &cdev, &size, &data, &status, &err);
    if (!prog || err || status) throw std::runtime_error("clCreateProgramWithBinary failed (" + std::to_string(err) + ")");
    if ((err = cl.build(prog, 1, &cdev, "", nullptr, nullptr)) != 0) {
      cl.release_program(prog);
      throw std::runtime_error("clBuildProgram on the binary failed (" + std::to_string(err) + ")");
    }
    void *k = cl.create_kernel(prog, raw_name.c_str(), &err);
    if (!k || err) {
      cl.release_program(prog);
      throw std::runtime_error("the binary has no kernel " + raw_name + " (" + std::to_string(err) + ")");
    }
    // the SYCL kernel keeps the OpenCL kernel (which keeps its program) for the process's lifetime
    return sycl::make_kernel<sycl::backend::opencl>(static_cast<cl_kernel>(k), ctx);
  }
  if (is_level_zero(dev)) {
    auto [mod, zk] = ze_module_kernel(sycl::get_native<sycl::backend::ext_oneapi_level_zero>(ctx),
                                      sycl::get_native<sycl::backend::ext_oneapi_level_zero>(dev), bin, raw_name);
    namespace lz = sycl::ext::oneapi::level_zero;
    auto kb = sycl::make_kernel_bundle<sycl::backend::ext_oneapi_level_zero, sycl::bundle_state::executable>(
        {mod, lz::ownership::transfer}, ctx);
    return sycl::make_kernel<sycl::backend::ext_oneapi_level_zero>({kb, zk, lz::ownership::transfer}, ctx);
  }
  throw std::runtime_error("no binary path for this backend");
}

// Identifies what produced a device binary: backend, platform, device, driver and SYCL runtime.
std::string device_fingerprint(const sycl::device &dev) {
  const sycl::platform p = dev.get_platform();
  std::string s = "backend=" + std::to_string(int(dev.get_backend()));
  s += "\nplatform=" + p.get_info<sycl::info::platform::name>() + " " + p.get_info<sycl::info::platform::version>();
  s += "\ndevice=" + dev.get_info<sycl::info::device::name>() + " " + dev.get_info<sycl::info::device::version>();
  s += "\ndriver=" + dev.get_info<sycl::info::device::driver_version>();
  s += "\nsycl=" + std::to_string(__LIBSYCL_MAJOR_VERSION) + "." + std::to_string(__LIBSYCL_MINOR_VERSION) + "." +
       std::to_string(__LIBSYCL_PATCH_VERSION);
  return s;
}

// ------------------------------------------------------------------------ the persistent cache
// One file per (device fingerprint, kernel): "GNNSKC01" | u32 n | header (n bytes: fingerprint,
// what was built) | u64 payload size | u64 payload fnv1a | payload (u32 m | the kernel's name in
// the binary (m bytes) | the device binary).
// File names hash the header; a read checks the whole header and the checksum, so a corrupt,
// truncated or misplaced file is never loaded. Writes go to a unique temporary file renamed into
// place (atomic on POSIX): concurrent processes each see a complete entry or none.
constexpr char kCacheMagic[8] = {'G', 'N', 'N', 'S', 'K', 'C', '0', '1'};

class DiskCache {
 public:
  static DiskCache &get() {
    static DiskCache c;
    return c;
  }
  const std::string &dir() const { return dir_; }

  struct Item {
    std::string raw_name, binary;
  };
  // The entry stored under `header`, or nullopt (a miss, or a bad entry: one warning).
  std::optional<Item> read(const std::string &header) {
    if (dir_.empty()) return std::nullopt;
    const fs::path p = path_of(header);
    bool ok = false;
    const std::string s = read_file(p, ok);
    if (!ok) return std::nullopt;  // no entry
    const std::size_t fixed = sizeof kCacheMagic + 4;
    std::uint32_t n = 0;
    if (s.size() >= fixed) std::memcpy(&n, s.data() + 8, 4);
    if (s.size() < fixed || std::memcmp(s.data(), kCacheMagic, 8) != 0 || s.size() < fixed + n + 16) {
      note(NoteLevel::warning, "corrupt kernel cache entry " + p.string() + " (bad header); rebuilding it");
      return std::nullopt;
    }
    if (s.compare(fixed, n, header) != 0) {
      note(NoteLevel::warning, "stale kernel cache entry " + p.string() + " (built for another kernel, device or "
                               "runtime); rebuilding it");
      return std::nullopt;
    }
    std::uint64_t size = 0, sum = 0;
    std::memcpy(&size, s.data() + fixed + n, 8);
    std::memcpy(&sum, s.data() + fixed + n + 8, 8);
    const std::size_t at = fixed + n + 16;
    std::uint32_t m = 0;
    const bool whole = s.size() - at == size && size >= 4;
    if (whole) std::memcpy(&m, s.data() + at, 4);
    if (!whole || fnv1a(s.data() + at, size) != sum || size < 4 + std::uint64_t(m)) {
      note(NoteLevel::warning, "corrupt kernel cache entry " + p.string() + " (checksum); rebuilding it");
      return std::nullopt;
    }
    return Item{s.substr(at + 4, m), s.substr(at + 4 + m)};
  }

  void write(const std::string &header, const std::string &raw_name, const std::string &bin) {
    if (dir_.empty() || bin.empty() || write_failed_) return;
    const std::uint32_t m = std::uint32_t(raw_name.size());
    std::string binary(reinterpret_cast<const char *>(&m), 4);
    binary += raw_name;
    binary += bin;
    std::error_code ec;
    fs::create_directories(dir_, ec);
    const fs::path p = path_of(header);
    thread_local std::mt19937_64 rng{std::random_device{}() ^ std::uint64_t(::getpid())};
    const fs::path tmp = p.string() + ".tmp." + std::to_string(::getpid()) + "." + hex(rng());
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      const std::uint32_t n = std::uint32_t(header.size());
      const std::uint64_t size = binary.size(), sum = fnv1a(binary.data(), binary.size());
      f.write(kCacheMagic, 8);
      f.write(reinterpret_cast<const char *>(&n), 4);
      f.write(header.data(), n);
      f.write(reinterpret_cast<const char *>(&size), 8);
      f.write(reinterpret_cast<const char *>(&sum), 8);
      f.write(binary.data(), std::streamsize(binary.size()));
      f.close();
      if (!f) {
        fs::remove(tmp, ec);
        return fail(ec ? ec.message() : "cannot write there");
      }
    }
    fs::rename(tmp, p, ec);
    if (ec) {
      fs::remove(tmp, ec);
      return fail("rename failed");
    }
  }

 private:
  DiskCache() {
    if (env_is("GNNSPARSE_CACHE", "0")) return;
    std::string base = env_or("GNNSPARSE_CACHE_DIR", "");
    if (base.empty()) {
      const std::string xdg = env_or("XDG_CACHE_HOME", "");
      const std::string home = env_or("HOME", "");
      if (!xdg.empty()) base = xdg + "/gnnsparse";
      else if (!home.empty()) base = home + "/.cache/gnnsparse";
      else return;
    }
    dir_ = (fs::path(base) / "sycl-kernels-v1").string();
  }
  fs::path path_of(const std::string &header) const {
    return fs::path(dir_) / (hex(fnv1a(header.data(), header.size())) + ".bin");
  }
  void fail(const std::string &why) {
    if (write_failed_.exchange(true)) return;
    note(NoteLevel::warning, "the kernel cache directory " + dir_ + " is not writable (" + why +
                                 "); kernels will be compiled again in every process (set GNNSPARSE_CACHE_DIR to "
                                 "a writable directory, or GNNSPARSE_CACHE=0 to turn the cache off)");
  }
  std::string dir_;
  std::atomic<bool> write_failed_{false};
};

// ------------------------------------------------------------------------------ shipped SPIR-V
class SpirvPacks {
 public:
  struct Entry {
    std::string file, raw_name;
    std::uint64_t off = 0, len = 0, hash = 0;
  };
  static SpirvPacks &get() {
    static SpirvPacks p;
    return p;
  }
  const Entry *find(std::uint64_t key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &it->second;
  }
  std::vector<std::uint64_t> keys() const {
    std::vector<std::uint64_t> k;
    for (const auto &e : index_) k.push_back(e.first);
    return k;
  }
  // The blob of an entry, checked against its hash; nullopt (and a warning) when it does not match.
  std::optional<std::string> blob(const Entry &e) const {
    std::ifstream f(e.file, std::ios::binary);
    std::string s(e.len, '\0');
    if (f.seekg(std::streamoff(e.off)) && f.read(s.data(), std::streamsize(e.len)) && fnv1a(s.data(), s.size()) == e.hash)
      return s;
    note(NoteLevel::warning, "shipped SPIR-V in " + e.file + " is damaged; compiling from source");
    return std::nullopt;
  }

 private:
  SpirvPacks() {
    if (env_is("GNNSPARSE_AOT", "0")) return;
    const std::string dir = kernel_dir();
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) return;
    std::vector<fs::path> files;
    for (const auto &de : fs::directory_iterator(dir, ec))
      if (de.path().extension() == ".gnnspv") files.push_back(de.path());
    std::sort(files.begin(), files.end());
    for (const auto &f : files) load(f);
  }
  void load(const fs::path &path) {
    std::ifstream f(path, std::ios::binary);
    char magic[8];
    std::uint64_t hash = 0;
    std::uint32_t count = 0;
    if (!f.read(magic, 8) || std::memcmp(magic, kPackMagic, 8) != 0 || !f.read(reinterpret_cast<char *>(&hash), 8) ||
        !f.read(reinterpret_cast<char *>(&count), 4)) {
      note(NoteLevel::warning, "ignoring " + path.string() + ": not a gnnsparse SPIR-V pack");
      return;
    }
    if (count == 0) return;  // a build without a device to compile with ships empty packs (it said so)
    if (hash != source_hash()) {
      note(NoteLevel::warning, "ignoring " + path.string() + ": built from other kernel sources than this module's "
                               "(a partial rebuild?); kernels compile from source");
      return;
    }
    std::error_code ec0;
    if (count > fs::file_size(path, ec0) / sizeof(PackRecord) || ec0) {
      note(NoteLevel::warning, "ignoring " + path.string() + ": truncated");
      return;
    }
    std::vector<PackRecord> recs(count);
    if (!f.read(reinterpret_cast<char *>(recs.data()), std::streamsize(count * sizeof(PackRecord)))) {
      note(NoteLevel::warning, "ignoring " + path.string() + ": truncated");
      return;
    }
    std::error_code ec;
    const std::uint64_t size = fs::file_size(path, ec);
    for (const PackRecord &r : recs)
      if (ec || r.name_off + std::uint64_t(r.name_len) > size || r.blob_off > size || r.blob_len > size - r.blob_off) {
        note(NoteLevel::warning, "ignoring " + path.string() + ": damaged index");
        return;
      }
    for (const PackRecord &r : recs) {
      std::string name(r.name_len, '\0');
      if (!f.seekg(std::streamoff(r.name_off)) || !f.read(name.data(), r.name_len)) {
        note(NoteLevel::warning, "ignoring " + path.string() + ": truncated");
        return;
      }
      index_[r.key] = Entry{path.string(), name, r.blob_off, r.blob_len, r.blob_hash};
    }
  }
  std::unordered_map<std::uint64_t, Entry> index_;
};

// ------------------------------------------------------------------- shipped device binaries
// <kernel_dir>/<arch>.gnnbin: native binaries for one device architecture (cmake/aot/pvc_binaries.sh),
// the pack format with magic "GNNBIN01". Used on Level Zero devices of that architecture only.
class NativePacks {
 public:
  static NativePacks &get() {
    static NativePacks p;
    return p;
  }
  // The pack for a device: its architecture's file, if shipped.
  const std::unordered_map<std::uint64_t, SpirvPacks::Entry> *for_device(const sycl::device &dev) {
    if (!is_level_zero(dev)) return nullptr;
    const std::string arch = arch_name(dev);
    auto it = packs_.find(arch);
    return it == packs_.end() ? nullptr : &it->second;
  }
  const std::unordered_map<std::uint64_t, SpirvPacks::Entry> *for_arch(const std::string &arch) {
    auto it = packs_.find(arch);
    return it == packs_.end() ? nullptr : &it->second;
  }
  static std::string arch_name(const sycl::device &dev) {
    try {
      namespace ex = sycl::ext::oneapi::experimental;
      if (dev.get_info<ex::info::device::architecture>() == ex::architecture::intel_gpu_pvc) return "pvc";
    } catch (sycl::exception &) {
    }
    return {};
  }

 private:
  NativePacks() {
    if (env_is("GNNSPARSE_AOT", "0")) return;
    const std::string dir = kernel_dir();
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) return;
    for (const auto &de : fs::directory_iterator(dir, ec))
      if (de.path().extension() == ".gnnbin") load(de.path());
  }
  void load(const fs::path &path) {
    std::ifstream f(path, std::ios::binary);
    char magic[8];
    std::uint64_t hash = 0;
    std::uint32_t count = 0;
    if (!f.read(magic, 8) || std::memcmp(magic, "GNNBIN01", 8) != 0 || !f.read(reinterpret_cast<char *>(&hash), 8) ||
        !f.read(reinterpret_cast<char *>(&count), 4) || hash != source_hash())
      return note(NoteLevel::warning, "ignoring " + path.string() + ": not device binaries of this module's kernels");
    std::error_code ec;
    const std::uint64_t size = fs::file_size(path, ec);
    if (ec || count > size / sizeof(PackRecord)) return note(NoteLevel::warning, "ignoring " + path.string() + ": damaged");
    std::vector<PackRecord> recs(count);
    if (!f.read(reinterpret_cast<char *>(recs.data()), std::streamsize(count * sizeof(PackRecord)))) return;
    for (const PackRecord &r : recs)
      if (r.name_off + std::uint64_t(r.name_len) > size || r.blob_off > size || r.blob_len > size - r.blob_off)
        return note(NoteLevel::warning, "ignoring " + path.string() + ": damaged index");
    auto &index = packs_[path.stem().string()];
    for (const PackRecord &r : recs) {
      std::string name(r.name_len, '\0');
      if (!f.seekg(std::streamoff(r.name_off)) || !f.read(name.data(), r.name_len)) return;
      index[r.key] = SpirvPacks::Entry{path.string(), name, r.blob_off, r.blob_len, r.blob_hash};
    }
  }
  std::unordered_map<std::string, std::unordered_map<std::uint64_t, SpirvPacks::Entry>> packs_;
};

}  // namespace

std::string native_binary_check(const std::string &arch, std::uint64_t key) {
  const auto *pack = NativePacks::get().for_arch(arch);
  if (!pack) return "no " + arch + " binaries shipped";
  auto it = pack->find(key);
  if (it == pack->end()) return "no " + arch + " binary for this instance";
  auto bin = SpirvPacks::get().blob(it->second);
  if (!bin) return "damaged";
  auto [mod, k] = ze_module_kernel(nullptr, nullptr, *bin, it->second.raw_name);
  (void)mod;
  (void)k;
  return "";
}

std::string cache_dir() { return DiskCache::get().dir(); }

std::string kernel_dir() {
  const std::string env = env_or("GNNSPARSE_KERNEL_DIR", "");
  if (!env.empty()) return env;
  Dl_info info{};  // the shared object (or executable) this runtime is linked into
  if (!dladdr(reinterpret_cast<void *>(&kernel_dir), &info) || !info.dli_fname) return {};
  std::error_code ec;
  const fs::path here = fs::canonical(info.dli_fname, ec).parent_path();
  for (const fs::path &p : {here / "kernels", here.parent_path() / "kernels"})
    if (fs::is_directory(p, ec)) return p.string();
  return {};
}

std::vector<std::uint64_t> shipped_spirv() { return SpirvPacks::get().keys(); }

namespace {
std::mutex g_records_mu;
std::vector<LoadRecord> g_records;
}  // namespace

std::vector<LoadRecord> load_records() {
  std::lock_guard<std::mutex> lock(g_records_mu);
  return g_records;
}

LoadedKernel load_kernel(const sycl::context &ctx, const sycl::device &dev, Instance in) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string name = instance_name(in);
  const bool esimd = std::string(in.spec().entry).rfind("esimd/", 0) == 0;
  const std::string fingerprint = device_fingerprint(dev);
  DiskCache &cache = DiskCache::get();
  auto done = [&](sycl::kernel k, Origin o) {
    const double ms = ms_since(t0);
    note(NoteLevel::debug, name + ": from " + origin_name(o) + ", " + ms_text(ms));
    std::lock_guard<std::mutex> lock(g_records_mu);
    g_records.push_back(LoadRecord{name, o, ms});
    return LoadedKernel{std::move(k), o};
  };

  // 1. shipped device binaries for this device's architecture (Level Zero)
  if (const auto *natives = NativePacks::get().for_device(dev))
    if (auto it = natives->find(in.key()); it != natives->end())
      if (auto bin = SpirvPacks::get().blob(it->second)) {
        try {
          return done(from_binary(ctx, dev, *bin, it->second.raw_name), Origin::native);
        } catch (std::exception &ex) {
          note(NoteLevel::warning, "the driver rejected the shipped binary of " + name + " (" + ex.what() + ")");
        }
      }

  // 2-3. shipped SPIR-V, through the cache of what earlier processes built from it
  SpirvPacks &packs = SpirvPacks::get();
  if (const SpirvPacks::Entry *e = packs.find(in.key())) {
    const std::string header = fingerprint + "\nspirv=" + hex(e->hash) + " " + e->raw_name;
    if (auto item = cache.read(header)) {
      try {
        return done(from_binary(ctx, dev, item->binary, item->raw_name), Origin::cache);
      } catch (std::exception &ex) {
        note(NoteLevel::warning, "the driver rejected a cached binary of " + name + " (" + ex.what() + "); rebuilding it");
      }
    }
    if (auto spv = packs.blob(*e)) {
      try {
        std::vector<std::byte> bytes(spv->size());
        std::memcpy(bytes.data(), spv->data(), spv->size());
        auto src = syclex::create_kernel_bundle_from_source(ctx, syclex::source_language::spirv, bytes);
        std::vector<std::string> opts;
        if (esimd) opts.push_back("-vc-codegen");  // ESIMD SPIR-V goes to the vector-compute backend
        auto exe = syclex::build(src, std::vector<sycl::device>{dev}, syclex::properties{syclex::build_options{opts}});
        sycl::kernel k = exe.ext_oneapi_get_kernel(e->raw_name);
        cache.write(header, e->raw_name, device_binary(exe, dev));
        return done(std::move(k), Origin::spirv);
      } catch (sycl::exception &ex) {
        note(NoteLevel::warning, "the driver rejected the shipped SPIR-V of " + name + " (" + ex.what() +
                                     "); compiling it from source");
      }
    }
  } else {
    note(NoteLevel::debug, name + ": not shipped (" +
                               (packs.keys().empty() ? std::string("no shipped kernels found") : "not in the build's list") +
                               "), compiling from source");
  }

  // 4. the run-time compiler, through the cache of what earlier processes built from source
  const std::string header = fingerprint + "\nsource=" + hex(source_hash()) + " " + name;
  if (auto item = cache.read(header)) {
    try {
      return done(from_binary(ctx, dev, item->binary, item->raw_name), Origin::cache);
    } catch (std::exception &ex) {
      note(NoteLevel::warning, "the driver rejected a cached binary of " + name + " (" + ex.what() + "); rebuilding it");
    }
  }
  auto exe = build_source_bundle(ctx, dev, in.spec().entry, name);
  sycl::kernel k = exe.ext_oneapi_get_kernel(name);
  cache.write(header, exe.ext_oneapi_get_raw_kernel_name(name), device_binary(exe, dev));
  return done(std::move(k), Origin::source);
}

}  // namespace gnnsparse::sycl_rt
