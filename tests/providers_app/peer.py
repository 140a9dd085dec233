"""The program a test tmux session runs: a runtime whose output and input tests control exactly.

It writes to the pane, byte for byte, whatever a test writes into ``<dir>/<pane>.fifo`` (terminal output
processing off, so no ``\\n`` becomes ``\\r\\n``), and appends every input line it receives to
``<dir>/<pane>.in`` (echo off, so typed input does not appear in the output).
"""

import os
import select
import sys
import termios

directory = sys.argv[1]
pane = os.environ["TMUX_PANE"]
attributes = termios.tcgetattr(0)
attributes[1] &= ~termios.OPOST
attributes[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, attributes)

fifo_path = os.path.join(directory, f"{pane}.fifo")
os.mkfifo(fifo_path + ".tmp")
os.rename(fifo_path + ".tmp", fifo_path)
fifo = os.open(fifo_path, os.O_RDWR)  # read-write: never sees end-of-file between writers

while True:
    ready, _, _ = select.select([fifo, 0], [], [])
    if fifo in ready:
        data = memoryview(os.read(fifo, 65536))
        while data:
            data = data[os.write(1, data) :]
    if 0 in ready:
        line = os.read(0, 65536)
        if not line:
            break
        with open(os.path.join(directory, f"{pane}.in"), "ab") as inbox:
            inbox.write(line)
