from ampgan.cli import main

main()
