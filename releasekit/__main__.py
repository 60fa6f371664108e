from releasekit.cli import main

main()
