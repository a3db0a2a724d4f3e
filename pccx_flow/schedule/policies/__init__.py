"""schedule/policies"""
