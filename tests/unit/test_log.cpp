// Log lines (common/log.hpp) of several processes sharing one stderr arrive whole: each line is
// one write(), whatever buffering the process gave its stdio stderr. The children here make
// stderr fully buffered in 16 bytes, so a line written through stdio would reach the pipe in
// pieces between the other children's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/log.hpp"

using namespace actorcc;

TEST(Log, LinesOfProcessesSharingStderrArriveWhole) {
  constexpr int kChildren = 4, kLines = 300;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::fflush(stderr);
  std::vector<pid_t> kids;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      dup2(fds[1], STDERR_FILENO);
      close(fds[1]);
      static char buf[16];
      std::setvbuf(stderr, buf, _IOFBF, sizeof buf);
      for (int i = 0; i < kLines; ++i)
        log::write(log::Level::Warn, "child " + std::to_string(c) + " line " + std::to_string(i) + " " +
                                         std::string(150, static_cast<char>('a' + c)));
      std::fflush(stderr);
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(fds[1]);
  std::string all;
  char chunk[65536];
  for (ssize_t n; (n = read(fds[0], chunk, sizeof chunk)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << "reading the children's stderr: " << std::strerror(errno);
    all.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  const std::regex line(R"(\[actorcc WARN pid \d+ \d\d:\d\d:\d\d\.\d{6}\] child (\d) line (\d+) ([a-d]{150}))");
  std::vector<int> next(kChildren, 0);
  std::istringstream in(all);
  int whole = 0;
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << "a broken line: " << l.substr(0, 200);
    const int c = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[2]), next[c]++) << "child " << c << "'s lines out of order";
    EXPECT_EQ(m[3].str(), std::string(150, static_cast<char>('a' + c)));
    ++whole;
  }
  EXPECT_EQ(whole, kChildren * kLines);
}
