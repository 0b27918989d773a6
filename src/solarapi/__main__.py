from solarapi.cli import main

main()
