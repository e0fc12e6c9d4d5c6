// System helpers of the launcher (see sysinfo.hpp).
#include "sysinfo.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <sstream>

#ifndef ACTORCC_BENCH_PLOT_DEFAULT
#define ACTORCC_BENCH_PLOT_DEFAULT ""
#endif

namespace actorcc::bench {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

std::string capture(const std::string& cmd) {
  std::FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  return rc == 0 ? out : "";
}

int run_command(const std::vector<std::string>& argv, bool quiet) {
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (quiet) {
      int fd = open("/dev/null", O_WRONLY);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
    }
    execvp(a[0], a.data());
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!trim(item).empty()) out.push_back(trim(item));
  return out;
}

std::string resolve_nccl_lib(const Config& c) {
  if (!c.nccl_lib.empty()) return c.nccl_lib;
  if (const char* e = std::getenv("ACTORCC_NCCL_LIB"); e && *e) return e;
  // The NCCL that PyTorch ships (pip package nvidia-nccl-cu*), as baselines/run2.sh finds it.
  std::string dir = trim(capture(
      "python3 -c \"import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))\""));
  if (!dir.empty() && std::filesystem::exists(dir + "/libnccl.so.2")) return dir + "/libnccl.so.2";
  return "libnccl.so.2";
}

std::string iso_date() {
  std::time_t t = std::time(nullptr);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

MachineInfo machine_info(const gpu::Probe& probe, bool gpus_used) {
  MachineInfo m;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  m.hostname = host;
  for (auto& d : probe.devices) {
    m.gpus.push_back(d.name);
    m.gpu_uuids.push_back(d.uuid);
    m.gpu_pci.push_back(d.pci);
  }
  if (gpus_used) {
    auto drv = split(capture("nvidia-smi --query-gpu=driver_version --format=csv,noheader"), '\n');
    m.driver = drv.empty() ? "unknown" : drv[0];
    int v = probe.driver_cuda_version;
    m.cuda = v ? std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) : "unknown";
    std::string topo = capture("nvidia-smi topo -m");
    m.links = topo.empty() ? "unknown" : topo;
  }
  return m;
}

void write_plot(const std::string& json_path, std::string script) {
  if (script.empty())
    if (const char* e = std::getenv("ACTORCC_BENCH_PLOT"); e && *e) script = e;
  if (script.empty()) script = ACTORCC_BENCH_PLOT_DEFAULT;
  std::string png = json_path;
  if (png.size() > 5 && png.compare(png.size() - 5, 5, ".json") == 0) png.resize(png.size() - 5);
  png += ".png";
  std::fflush(stdout);
  if (script.empty() || !std::filesystem::exists(script)) {
    std::printf("# plot: no plot script found (give --plot PATH to bench/plot.py)\n");
  } else if (run_command({"python3", "-c", "import matplotlib"}, true) != 0) {
    std::printf("# plot: matplotlib is not importable; later: python3 %s %s -o %s\n", script.c_str(),
                json_path.c_str(), png.c_str());
  } else if (run_command({"python3", script, json_path, "-o", png, "-q"}) == 0) {
    std::printf("# wrote %s\n", png.c_str());
  } else {
    std::printf("# plot: %s failed\n", script.c_str());
  }
  std::fflush(stdout);
}

}  // namespace actorcc::bench
