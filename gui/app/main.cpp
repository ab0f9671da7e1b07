// gpuplan-gui placeholder: a window that says what is coming. The explorer itself is a later issue.
#include <QApplication>
#include <QLabel>
#include <QMainWindow>

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QMainWindow w;
  w.setWindowTitle("gpuplan");
  auto* label = new QLabel("gpuplan — what-if explorer (in development).\nUse the gpuplan CLI meanwhile.");
  label->setAlignment(Qt::AlignCenter);
  w.setCentralWidget(label);
  w.resize(640, 400);
  w.show();
  return QApplication::exec();
}
